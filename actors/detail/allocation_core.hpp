#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <caf/error.hpp>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/detail/block_advice.hpp>
#include <uma/memory/advice_state.hpp>
#include <uma/memory/allocator_snapshot.hpp>
#include <uma/memory/allocator_stats.hpp>
#include <uma/memory/block_allocator.hpp>
#include <uma/memory/coalesce.hpp>
#include <uma/memory/detail/region_table.hpp>
#include <uma/memory/resource_stack.hpp>
#include <uma/messages/requests.hpp>
#include <uma/sys/worker_lanes.hpp>

namespace uma::detail {

/// What one allocator incarnation owns and decides, without its messaging: the region table,
/// the ids, the block allocator, advice bookkeeping, its own counters, and the freeing part of
/// post_stop. Memory comes from a resource stack (memory/resource_stack.hpp) composed from the
/// config: quota and rounding live there, not here. The actor
/// (actors/managed_allocator.cpp) owns one and adds requests, replies, lanes' jobs and stop
/// order. Part of the incarnation's state (actors/detail/incarnation.hpp), reachable only through
/// its guard; not thread-safe on its own. Throws `uma::error`
/// where a request is refused.
class allocation_core {
 public:
  allocation_core(const allocator_config& config, std::shared_ptr<backend> backend,
                  std::shared_ptr<control_block> control, worker_lanes& lanes);
  allocation_core(const allocation_core&) = delete;
  allocation_core& operator=(const allocation_core&) = delete;

  // -- allocation -------------------------------------------------------------------------------

  /// Every check of an allocate request that is about the request (sizes, stream), before
  /// anything changes; what the stack refuses (alignment, quota, overflow) it throws itself.
  [[nodiscard]] allocation_request checked_request(const allocate_request& r) const;
  /// The memory for `r`, used on `stream`. Under the `pool` policy a request the block
  /// allocator serves (`as_block`) is one of its blocks, labelled when `r` is (the ref is the
  /// block's: no region of the table; a miss carves a slab); anything else is a direct region.
  /// Either is at most one backend call on the actor's thread: what `direct` means. Throws
  /// what the stack or the block allocator throws (nothing changed then).
  [[nodiscard]] byte_ref allocate_now(const allocation_request& r, stream_view stream);
  /// True when `r` is served as a block: the `pool` policy, a size the block allocator serves,
  /// at most page alignment, attached globally.
  [[nodiscard]] bool as_block(const allocation_request& r) const noexcept;
  /// A block of `blocks` for `r` (a labelled one when `r` has a label), used on `stream`.
  [[nodiscard]] static byte_ref take_block(block_allocator& blocks, const allocation_request& r,
                                           stream_view stream);
  /// Registers memory the stack returned as a region; the ref is its first handle. On failure
  /// (host memory) the memory goes back to the stack.
  [[nodiscard]] byte_ref adopt(const allocation& a, attach_flag attach);
  /// The top of the resource stack, shared (a job on a lane or an allocation in transit keeps
  /// it alive).
  [[nodiscard]] std::shared_ptr<memory_resource> resources() const noexcept;

  /// The incarnation's block allocator (small blocks on the caller's thread; its slabs join
  /// the table in `drain_releases`).
  [[nodiscard]] const block_allocator_ref& blocks() const noexcept { return blocks_; }

  // -- requests on refs -------------------------------------------------------------------------

  /// Every ref non-empty, of this incarnation, none overlapping (detail::check_refs; an inert
  /// one counts in `inert_refusals`). Returns `refs`, so that a caller can pass them on.
  std::span<const byte_ref> check_refs(std::span<const byte_ref> refs, const char* op);
  /// What a prefetch leaves for the runtime: its reply and its ranges, merged.
  struct prefetch_work {
    op_result summary;
    coalesced_ranges merged;
  };
  /// Checks a prefetch (refs, targets, stream: a refusal changes nothing), records it in the
  /// history (with each region's last prefetch location) and merges its ranges.
  [[nodiscard]] prefetch_work prefetch_work_for(const prefetch_request& r, bool discard_first);
  /// The ranges of `refs`, each keyed by the allocation it lies in, merged where adjacent.
  [[nodiscard]] coalesced_ranges coalesced(std::span<const byte_ref> refs,
                                           std::span<const location> locations);
  /// What the allocator knows of the advice on `ref`'s region; a block is tracked from its first
  /// advice on (its last drop then comes back through the actor for a reset).
  [[nodiscard]] advice_state& track_advice(const byte_ref& ref);
  /// The same by id, or null for an id it does not track.
  [[nodiscard]] advice_state* advice_of(std::uint64_t id);
  /// What an advise request leaves for the runtime: its ranges and the regions they lie in.
  /// Advice known to change nothing on a whole region is counted as elided and left out.
  struct advice_work {
    op_result summary;
    std::vector<byte_range> todo;
    std::vector<std::uint64_t> touched;
  };
  [[nodiscard]] advice_work advice_work_for(const advise_request& r);
  /// Checks an advise request: its refs, the advice at its location (a refusal changes nothing).
  void check_advice(const advise_request& r);
  /// True when, as far as the allocator knows, `r` (checked) changes nothing: every ref a whole
  /// region or block whose tracked advice already says so.
  [[nodiscard]] bool changes_nothing(const advise_request& r);
  /// check_advice, then records the request in the history, then advice_work_for.
  [[nodiscard]] advice_work checked_advice(const advise_request& r);
  /// The runtime refused advice on `ids`: what is in force there is no longer known.
  void forget_advice(std::span<const std::uint64_t> ids) noexcept;
  /// Whether `loc` (validated here, as `ref`: invalid_argument) can access `ref`'s memory: the host
  /// always, a device when it has managed memory and the region is attached globally or the device
  /// has concurrent managed access.
  [[nodiscard]] bool can_access(const location& loc, const byte_ref& ref);
  /// The table entry holding `ref`'s memory (a block's: its slab's).
  [[nodiscard]] const region_table::entry* entry_of(const byte_ref& ref);

  // -- releases, quota, stats -------------------------------------------------------------------

  /// Puts new slabs in the table, then handles every queued release: direct regions and slabs
  /// back through the stack on the general lane (cudaFree synchronizes the device), advised
  /// blocks reset and given back to the block allocator.
  void drain_releases();
  /// Sets the quota (0: only reads it); throws invalid_argument below the bytes held. Returns
  /// the quota in force.
  std::uint64_t set_quota(std::uint64_t bytes);
  /// Counts a failed request under its code.
  void count_failure(const caf::error& err);
  /// Counts a failed request under `code`.
  void count_failure(errc code) { ++stats_.failures[static_cast<std::size_t>(code)]; }
  /// Counts a finished prefetch (and its discard).
  void count_prefetch(const op_result& r, bool discard_first);
  /// Counts a finished discard.
  void count_discard(const op_result& r);
  /// Counts advised ranges and elided advice.
  void count_advice(std::uint64_t ranges, std::uint64_t elided);
  /// The `stats` reply: the stack's counters and the core's own.
  [[nodiscard]] allocator_stats stats() const;
  /// The copies made between the incarnation's memory so far (memory/copy.hpp).
  [[nodiscard]] copy_counts copies() const noexcept { return control_->copies().counts(); }
  /// The `regions` reply.
  [[nodiscard]] std::vector<region_info> report() const;
  /// The region table.
  [[nodiscard]] const region_table& table() const noexcept { return table_; }
  /// The label of the allocation whose data starts at `data` ("" when none).
  [[nodiscard]] std::string label_of(const void* data) const {
    return stack_->tracking().label_of(data);
  }
  /// Called with a region's id when the core takes it out of its table (freed).
  void set_on_free(std::function<void(std::uint64_t)> f) { on_free_ = std::move(f); }

  // -- history and snapshots --------------------------------------------------------------------

  /// Records a request on `refs` in the event history, one event per ref (a prefetch also sets
  /// each region's last prefetch location: one per ref, or one for all). `detail` says more.
  void note(event_kind kind, std::span<const byte_ref> refs,
            std::span<const location> locations = {}, std::string_view detail = {});
  /// The `snapshot` reply: stats, every region with its policy, advice and last prefetch, and
  /// the event history.
  [[nodiscard]] allocator_snapshot snapshot() const;

  /// The freeing part of post_stop, once the lanes have drained and the device synchronized:
  /// every unpinned region (a direct region or a block allocator's slab) back through the
  /// stack; one pinned after a timed-out drain is leaked and reported. Returns the backend bytes
  /// leaked.
  std::uint64_t stop(stop_report& report) noexcept;

 private:
  void adopt_slabs(const std::vector<slab_adoption>& slabs);
  void leak(std::uint64_t id, const region_table::entry& e, stop_report& report);

  const allocator_config& config_;
  std::shared_ptr<backend> backend_;
  std::shared_ptr<control_block> control_;
  worker_lanes& lanes_;
  std::shared_ptr<resource_stack> stack_;
  region_table table_;
  allocator_stats stats_;  // the core's own counters; stats() adds the stack's
  block_allocator_ref blocks_;
  block_advice block_advice_;  // the advice on blocks, and their way back through the actor
  std::shared_ptr<event_history> history_;
  std::function<void(std::uint64_t)> on_free_;
};

}  // namespace uma::detail
