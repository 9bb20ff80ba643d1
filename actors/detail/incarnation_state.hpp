#pragma once

#include <cstdint>
#include <memory>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/detail/allocation_core.hpp>
#include <uma/actors/detail/off_loop_jobs.hpp>
#include <uma/actors/detail/release_ticker.hpp>
#include <uma/actors/detail/residency_core.hpp>
#include <uma/memory/control_block.hpp>
#include <uma/sys/worker_lanes.hpp>

namespace uma::detail {

/// What an incarnation's lock guards (actors/detail/incarnation.hpp): the allocation and
/// residency cores, the release ticker and the jobs in flight on the lanes. Reachable only
/// through incarnation::guard; not thread-safe on its own.
struct incarnation_state {
  /// `lanes` is joined before the state goes (incarnation::close).
  incarnation_state(const allocator_config& config, std::shared_ptr<backend> b,
                    const std::shared_ptr<control_block>& control, worker_lanes& lanes);

  /// The checks of an allocate request before anything is allocated (device memory also
  /// against its device's budget).
  [[nodiscard]] allocation_request checked(const allocate_request& r);
  /// Registers memory the stack returned for a request attached `attach`; device memory is
  /// charged to its budget and what made room there is evicted.
  [[nodiscard]] byte_ref adopt(const allocation& memory, attach_flag attach);
  /// Queues the evictions of `work` (a plan's or a reservation's) on their lane.
  void run_evictions(residency_work& work) {
    if (work.evict)
      lanes.post(work.evict_lane, std::move(work.evict));
  }
  /// Room for a refused allocation's one more try: the block allocator's idle slabs and the
  /// queued releases go back (their frees queued on the general lane). Returns the slabs' bytes.
  std::uint64_t make_room();
  /// Handles the releases queued by last drops, if any, as every request does first. The
  /// actor drains through `ticker` instead, which also tells it to tick.
  void drain() {
    if (control.has_releases())
      core.drain_releases();
  }
  /// The `stats` reply.
  [[nodiscard]] allocator_stats stats() const { return residency.with_totals(core.stats()); }

  std::shared_ptr<backend> runtime;
  control_block& control;
  worker_lanes& lanes;
  allocation_core core;
  residency_core residency;
  release_ticker ticker;
  off_loop_jobs jobs;
};

}  // namespace uma::detail
