#pragma once

// The control block and region record behind every ManagedRef (memory/managed_ref.hpp). Public
// and installed because managed_ref's copy and release are inline (add_ref, drop_ref's fast
// path): the cache-hit path depends on that, so the record cannot hide behind a pointer to an
// opaque type. The types stay in uma::detail: users name ManagedRef, never these.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <uma/memory/copy_ledger.hpp>
#include <uma/memory/hook.hpp>
#include <uma/memory/stop_report.hpp>
#include <uma/sys/backend.hpp>
#include <uma/sys/error.hpp>

namespace uma {

namespace detail {

class slab;
struct region;

/// A slab the block allocator carved, for the actor's region table.
struct slab_adoption {
  region* home;          ///< the slab's region (the table takes its initial count)
  std::uint32_t blocks;  ///< how many blocks it was carved into
};

/// What the actor takes from the queue in one go: the slabs carved and the regions released
/// since its last take. One snapshot under one lock: a slab is queued when it is carved, before
/// any release of it can be, so it is always in the batch of its release or an earlier one.
struct release_batch {
  std::vector<slab_adoption> slabs;
  std::vector<std::uint64_t> ids;
};

/// Shared by one allocator incarnation and every region (and so every ref) it handed out. It
/// outlives the actor: refs consult it to learn that the actor stopped.
///
/// Ordering: pin acquisition and stop use sequentially consistent operations on `pins_` and
/// `state_` (a store-load pair on each side), so either the pinner sees the stop or the stopper
/// sees the pin.
class control_block {
 public:
  control_block(std::uint64_t generation, std::shared_ptr<backend> backend)
      : generation_(generation), backend_(std::move(backend)) {}

  [[nodiscard]] allocator_state state() const noexcept {
    return static_cast<allocator_state>(state_.load(std::memory_order_seq_cst));
  }
  [[nodiscard]] bool alive() const noexcept { return state() == allocator_state::alive; }
  [[nodiscard]] std::uint64_t generation() const noexcept { return generation_; }
  [[nodiscard]] backend& owning_backend() const noexcept { return *backend_; }

  /// Counts a pin unless the allocator is stopping; false when it is.
  [[nodiscard]] bool try_acquire_pin() noexcept;
  /// Uncounts a pin; wakes a stopper waiting for pins to drain.
  void release_pin() noexcept;
  [[nodiscard]] std::int64_t pins() const noexcept { return pins_.load(); }

  /// Called on the last drop of a live region's refs: queues `region_id` for the actor and
  /// wakes it once per batch of releases. False when nothing was queued (the allocator is
  /// stopping: post_stop frees what it owns; or host memory ran out).
  bool enqueue_release(std::uint64_t region_id) noexcept;
  /// Queues a slab the block allocator just carved: the actor puts it in its table before it
  /// handles its next message. Queued in every state (post_stop takes what a growth queued
  /// before the block allocator was sealed). Throws std::bad_alloc, queueing nothing. Wakes
  /// nobody: the caller calls `wake` once its own locks are released.
  void enqueue_slab(region* home, std::uint32_t blocks);
  /// Wakes the actor when something is queued and neither a wake-up nor a tick is due.
  void wake() noexcept;
  /// Takes every queued slab and release (the allocator's drain, under its incarnation's lock).
  [[nodiscard]] release_batch take_releases();
  /// How to wake the actor (a message to it); cleared at stop so nothing keeps the actor alive.
  void set_waker(hook<> waker);
  /// How a fatal error raised off the actor's thread ends the incarnation (a message that makes
  /// the actor quit with it); cleared at stop, as the waker.
  void set_on_fatal(hook<errc, const std::string&> on_fatal);
  /// A backend call on a caller's thread or a lane failed in a way that ends the incarnation
  /// (`is_fatal`): the actor is told, whichever path made the call (docs/reliability.md).
  void report_fatal(const error& e) noexcept;
  /// Runs `call`, a backend call off the actor's thread, and returns what it returns; a fatal
  /// error it throws is reported (report_fatal) before it goes on to the caller.
  template <class Call>
  decltype(auto) watched(Call&& call) {
    try {
      return std::forward<Call>(call)();
    } catch (const error& e) {
      if (is_fatal(e))
        report_fatal(e);
      throw;
    }
  }
  /// True while releases wait: the actor's lock-free check before it handles a message.
  [[nodiscard]] bool has_releases() const noexcept {
    return has_releases_.load(std::memory_order_acquire);
  }
  /// The actor promises to drain within its release tick, so releases stop waking it (no
  /// message, no scheduler wake-up on the releasing thread). False when already armed.
  [[nodiscard]] bool arm_tick();
  /// Ends that promise, unless releases wait: then it stays armed and the actor drains and
  /// ticks again. True when disarmed (the next release wakes the actor again).
  [[nodiscard]] bool disarm_tick();

  /// alive -> stopping: from now on pins fail and releases are left to post_stop.
  void begin_stop() noexcept;
  /// Waits up to `timeout` for every pin to be released; true when they were.
  [[nodiscard]] bool wait_for_pins(std::chrono::milliseconds timeout);
  /// stopping -> stopped, publishing what post_stop did.
  void finish_stop(stop_report report);
  /// The report of the finished stop, if the allocator has stopped.
  [[nodiscard]] std::optional<stop_report> report() const;
  /// The first of `n` fresh ids of this incarnation's regions and blocks (any thread).
  [[nodiscard]] std::uint64_t reserve_ids(std::uint64_t n) noexcept {
    return next_id_.fetch_add(n, std::memory_order_relaxed);
  }
  /// The copies made between this incarnation's memory (memory/copy.hpp), any thread.
  [[nodiscard]] copy_ledger& copies() noexcept { return copies_; }
  [[nodiscard]] const copy_ledger& copies() const noexcept { return copies_; }

 private:
  const std::uint64_t generation_;
  const std::shared_ptr<backend> backend_;  // frees in post_stop need it; refs may outlive it
  std::atomic<int> state_{static_cast<int>(allocator_state::alive)};
  std::atomic<std::int64_t> pins_{0};
  std::atomic<std::uint64_t> next_id_{1};
  copy_ledger copies_;

  mutable std::mutex mutex_;
  std::condition_variable pins_released_;
  std::vector<std::uint64_t> releases_;
  std::vector<slab_adoption> slabs_;
  std::atomic<bool> has_releases_{false};
  bool wake_pending_ = false;
  bool tick_armed_ = false;
  hook<> waker_;
  hook<errc, const std::string&> on_fatal_;
  std::optional<stop_report> report_;

  /// The waker to call once `mutex_` is released, if a wake-up is due (`mutex_` held).
  [[nodiscard]] hook<> due_wake();
};

/// One managed allocation. `refs` counts the user handles (ManagedRef copies, pins); `owners`
/// counts who may still touch the record: the actor's region table (until it freed the memory)
/// and the users as a group (while refs > 0). Whoever drops the last owner deletes the record.
/// Keeping the two apart means a clone's drop is one decrement and never reads the record after
/// it: only the last user, which still owns it, reads it (then lets go).
struct region {
  // Parameters end in `_` so that they shadow no member (consumers build with -Wshadow).
  region(std::shared_ptr<control_block> control_, std::uint64_t id_, void* base_, std::byte* data_,
         std::size_t bytes_, std::size_t backend_bytes_, region* home_ = nullptr,
         detail::slab* parent_ = nullptr, memory_kind kind_ = memory_kind::cuda_managed,
         int device_ = 0)
      : control(std::move(control_)),
        id(id_),
        base(base_),
        data(data_),
        bytes(bytes_),
        backend_bytes(backend_bytes_),
        home(home_ != nullptr ? home_ : this),
        parent(parent_),
        kind(kind_),
        device(device_) {}

  std::atomic<std::int64_t> refs{0};    ///< user handles
  std::atomic<std::int32_t> owners{1};  ///< the table, plus 1 while refs > 0
  std::atomic<std::int64_t> pins{0};
  const std::shared_ptr<control_block> control;
  const std::uint64_t id;
  void* const base;                 ///< what the backend returned (freed with backend_bytes)
  std::byte* const data;            ///< first byte the user sees (base + alignment padding)
  const std::size_t bytes;          ///< bytes the user asked for
  const std::size_t backend_bytes;  ///< what the stack charged for it (a block: its class size)
  /// The region in the allocator's table that holds this memory: itself, or for a block its
  /// slab's region (pins count there, so post_stop sees them).
  region* const home;
  /// The slab this block was carved from (its last drop returns it there), or null for a region.
  detail::slab* const parent;
  /// Managed memory, or a tier's (pinned_host, cuda_device: docs/design.md "Tiers"), which
  /// never migrates; how the memory goes back to the backend.
  const memory_kind kind;
  const int device;  ///< the device of cuda_device memory
  /// A block whose advice the allocator changed: its last drop goes through the actor, which
  /// resets the advice before the block is handed out again.
  std::atomic<bool> needs_reset{false};

  [[nodiscard]] bool is_block() const noexcept { return parent != nullptr; }
};

/// Adds a user count (a copy of a ref). Relaxed: the caller already holds one.
inline void add_ref(region* r) noexcept {
  r->refs.fetch_add(1, std::memory_order_relaxed);
}

/// The actor hands out the first user count of a fresh region (refs 0 -> 1, users own it).
inline void adopt_first_ref(region* r) noexcept {
  r->owners.fetch_add(1, std::memory_order_relaxed);
  r->refs.fetch_add(1, std::memory_order_relaxed);
}

/// Drops a user count. The last one hands a live region back to its actor; if the table let go
/// already (the allocator stopped), it deletes the record. A block goes back to its block
/// allocator (`block_dropped`, defined in memory/block_allocator.cpp).
void drop_ref(region* r) noexcept;

/// The last drop of a block (defined with the slab).
void block_dropped(region* r) noexcept;

/// The actor drops the table's ownership once it freed (or leaked) the memory; deletes the
/// record unless users still hold it.
void drop_table_ref(region* r) noexcept;

}  // namespace detail
}  // namespace uma
