#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <uma/actors/allocator_config.hpp>
#include <uma/memory/advice_state.hpp>
#include <uma/memory/allocator_stats.hpp>
#include <uma/memory/coalesce.hpp>
#include <uma/memory/pool.hpp>
#include <uma/memory/region_table.hpp>
#include <uma/messages/requests.hpp>
#include <uma/sys/worker_lanes.hpp>

namespace uma::detail {

/// What one allocator incarnation owns and decides, without its messaging: the region table, the
/// pool, the counters, the quota and the ids; allocation (direct, pooled, parked while the pool
/// grows), leases, releases, advice bookkeeping, and the freeing part of post_stop. The actor
/// (actors/managed_allocator.cpp) owns one and adds requests, replies, lanes' jobs and stop
/// order. Actor-thread only; throws `uma::error` where a request is refused.
class allocation_core {
 public:
  /// A validated allocation: what to ask for, and where from.
  struct plan {
    std::size_t bytes = 0;          ///< what the user asked for
    std::size_t alignment = 0;      ///< of the first byte the user sees
    std::size_t backend_bytes = 0;  ///< a pooled block's page-rounded size, or bytes + padding
    bool pooled = false;
    attach_flag attach = attach_flag::global;
    std::string label;
  };
  /// A validated lease: its backing allocation and how to carve it.
  struct lease_plan {
    plan backing;
    std::size_t block_bytes = 0;
    std::uint32_t blocks = 0;
  };
  /// Completion of an allocation that had to wait for the pool to grow.
  using done_fn = std::function<void(caf::expected<byte_ref>)>;
  /// Starts one slab growth of `bytes` off the actor's loop; the allocator calls `on_slab` with
  /// its outcome, and the slab itself is left in `growth_slot()`.
  using grow_fn = std::function<void(std::size_t bytes)>;

  /// Where the general lane leaves a slab it allocated for the pool (read back on the actor
  /// thread after the job's completion, or by `stop` after the lanes drained).
  struct growth_slot {
    std::atomic<void*> base{nullptr};
    std::size_t bytes = 0;
  };

  allocation_core(const allocator_config& config, std::shared_ptr<backend> backend,
                  std::shared_ptr<control_block> control, worker_lanes& lanes, grow_fn grow);
  allocation_core(const allocation_core&) = delete;
  allocation_core& operator=(const allocation_core&) = delete;

  // -- allocation -------------------------------------------------------------------------------

  /// Every check of an allocate request, before anything changes.
  [[nodiscard]] plan plan_allocation(const allocate_request& r) const;
  /// The region now, or nullopt when the pool has no room (a slab must be added first). A
  /// direct region is one backend call on the actor's thread: what `direct` means.
  [[nodiscard]] std::optional<byte_ref> try_allocate_now(const plan& p);
  /// Waits for a slab: `done` runs once the pool grew (or could not).
  void park(plan p, done_fn done);
  /// The outcome of the growth `grow_fn` started.
  void on_slab(caf::error err);
  [[nodiscard]] std::shared_ptr<growth_slot> growth() const noexcept { return growth_; }

  /// Every check of a lease request, before anything changes.
  [[nodiscard]] lease_plan plan_lease(const lease_request& r) const;
  /// Carves the backing region into the lease's blocks (ids reserved here).
  [[nodiscard]] block_cache make_lease(byte_ref backing, std::size_t block_bytes,
                                       std::uint32_t blocks);

  // -- requests on refs -------------------------------------------------------------------------

  /// The ranges of `refs`, each keyed by the allocation it lies in, merged where adjacent.
  [[nodiscard]] coalesced_ranges coalesced(std::span<const byte_ref> refs,
                                           std::span<const location> locations);
  /// What the allocator knows of the advice on `ref`'s region; a leased block is tracked from
  /// its first advice on (its last drop then comes back through the actor for a reset).
  [[nodiscard]] advice_state& track_advice(const byte_ref& ref);
  /// The same by id, or null for an id it does not track.
  [[nodiscard]] advice_state* advice_of(std::uint64_t id);
  /// The table entry holding `ref`'s memory (a leased block's: its lease's).
  [[nodiscard]] const region_table::entry* entry_of(const byte_ref& ref);

  // -- releases, quota, stats -------------------------------------------------------------------

  /// Handles every queued release: pooled blocks back to the pool (advice reset on the general
  /// lane), direct regions freed on it, advised leased blocks reset and given back.
  void drain_releases();
  /// Sets the quota (invalid_argument below the live bytes); returns the quota in force.
  std::uint64_t set_quota(std::uint64_t bytes);
  [[nodiscard]] std::uint64_t trim() { return pool_ ? pool_->trim() : 0; }
  void count_failure(const caf::error& err);
  void count_failure(errc code) { ++stats_.failures[static_cast<std::size_t>(code)]; }
  [[nodiscard]] std::uint64_t& inert_refusals() noexcept { return stats_.inert_refusals; }
  void count_prefetch(const op_result& r, bool discard_first);
  void count_discard(const op_result& r);
  void count_advice(std::uint64_t ranges, std::uint64_t elided);
  [[nodiscard]] allocator_stats stats() const;
  [[nodiscard]] const region_table& table() const noexcept { return table_; }

  /// The freeing part of post_stop, once the lanes have drained and the device synchronized:
  /// answers parked requests, frees a late slab, every unpinned region and the pool (a region
  /// pinned after a timed-out drain is leaked and reported). Returns the backend bytes leaked.
  std::uint64_t stop(stop_report& report) noexcept;

 private:
  void check_quota(std::size_t backend_bytes) const;
  [[nodiscard]] std::size_t page_bytes() const noexcept;
  void fail_parked_head(caf::error err);
  void grow_pool();
  void serve_parked();
  void release_leased_block(std::uint64_t id);

  /// An allocation parked until the general lane has added a slab.
  struct parked {
    plan p;
    done_fn done;
    bool retried = false;  ///< the one retry after an out-of-memory growth was used
  };
  /// A leased block whose advice the allocator changed (reset when it comes back).
  struct leased_block {
    region* block;
    advice_state state;
  };

  const allocator_config& config_;
  std::shared_ptr<backend> backend_;
  std::shared_ptr<control_block> control_;
  worker_lanes& lanes_;
  grow_fn grow_;
  std::uint64_t quota_;
  region_table table_;
  allocator_stats stats_;
  std::uint64_t next_id_ = 1;
  std::unique_ptr<block_pool> pool_;  // pool policy only
  std::unordered_map<std::uint64_t, leased_block> leased_advice_;
  std::shared_ptr<growth_slot> growth_ = std::make_shared<growth_slot>();
  std::deque<parked> parked_;
  bool growing_ = false;
};

}  // namespace uma::detail
