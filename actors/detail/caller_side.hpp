#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <uma/memory/memory_resource.hpp>
#include <uma/messages/caller_calls.hpp>
#include <uma/sys/backend.hpp>
#include <uma/sys/detail/spin_mutex.hpp>

namespace uma {
class worker_lanes;
}  // namespace uma

namespace uma::detail {

class allocation_core;
class control_block;
class residency_core;

/// The lock an allocator incarnation's state is under: the actor holds it while it runs (each
/// resume), a caller holds it for the part of a caller call that reads or changes that state.
/// It spins before it parks (a caller's part takes a microsecond or two), knows which thread
/// holds it (post_stop runs inside a resume or, from the actor's destruction, outside one), and
/// a caller waits for it only until a deadline.
class core_lock {
 public:
  void lock() noexcept {
    mutex_.lock();
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  /// Takes the lock before `deadline`, or returns false.
  [[nodiscard]] bool try_lock_until(std::chrono::steady_clock::time_point deadline) noexcept;
  void unlock() noexcept {
    owner_.store(std::thread::id{}, std::memory_order_relaxed);
    mutex_.unlock();
  }
  /// True on the thread that holds it.
  [[nodiscard]] bool held_here() const noexcept {
    return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }

 private:
  spin_mutex mutex_;
  std::atomic<std::thread::id> owner_{};
};

/// An incarnation's caller calls (messages/caller_calls.hpp; docs/design.md "Calls on the
/// caller's thread"). Each call takes the core lock, runs the same checks and bookkeeping as
/// the actor's handler (allocation_core: nothing is written twice), makes the backend call with
/// no lock held, and takes the lock again for the counters. While a call's backend call runs it
/// is counted as active: post_stop (`end`) waits for it before it frees anything, as it waits
/// for the lanes.
class caller_side final : public caller_calls {
 public:
  /// The actor's parts, which outlive every call (`end` runs before they go). A backend call
  /// that failed in a way that ends the incarnation is reported to `control`
  /// (`control_block::report_fatal`, with no lock held).
  caller_side(allocation_core& core, residency_core& residency, worker_lanes& lanes,
              control_block& control, std::shared_ptr<backend> b);

  [[nodiscard]] std::optional<byte_ref> allocate(const allocate_request& r,
                                                 deadline until) override;
  [[nodiscard]] std::optional<op_result> prefetch(const prefetch_request& r, bool discard_first,
                                                  deadline until) override;
  [[nodiscard]] std::optional<op_result> advise(const advise_request& r, deadline until) override;
  [[nodiscard]] range_attributes attributes(const byte_ref& ref, deadline until) override;
  [[nodiscard]] std::optional<allocator_stats> stats(deadline until) override;
  [[nodiscard]] bool ended() const noexcept override;

  // -- the actor's side ---------------------------------------------------------------------------

  /// The lock the actor holds while it runs.
  [[nodiscard]] core_lock& lock() noexcept { return lock_; }
  /// The start of post_stop, the core lock held: no call starts from now on (they throw
  /// `allocator_stopped`), and the calls whose backend call runs are waited for.
  void end() noexcept;

 private:
  /// The core lock until the end of a scope; throws as a call must (timeout, stopped).
  class entered;
  /// What a call throws: a uma::error as it was thrown (a fatal_error or a sticky cuda_error
  /// stays one), anything else as the actor's handlers answer it (host memory: out_of_memory;
  /// otherwise backend_error); and whether it ends the incarnation.
  struct failure {
    std::exception_ptr thrown;
    errc code = errc::backend_error;
    bool fatal = false;
    std::string what;
  };
  [[nodiscard]] static failure failure_of(std::exception_ptr thrown);
  /// Runs `part` under the core lock; what it throws is counted as a failure there.
  template <class Part>
  auto locked(deadline until, Part&& part);
  /// With no lock held: reports a fatal failure to the control block, then throws it.
  [[noreturn]] void raise_after(const failure& f);
  /// A backend call's failure: counted (the lock taken again), then raise_after.
  [[noreturn]] void count_then_raise(const failure& f, deadline until);
  /// A backend call counted in `active_` has returned.
  void finished() noexcept;
  /// A region's memory refused by the quota or the backend, tried once more on the general lane
  /// behind the frees queued before it, as the actor tries it.
  [[nodiscard]] allocation retry_on_lane(const allocation_request& req, deadline until);
  /// Under the lock: the releases queued by last drops are handled, as the actor handles them
  /// before each request (frees queued on the general lane, new slabs into the table).
  void drain();

  allocation_core& core_;
  residency_core& residency_;
  worker_lanes& lanes_;
  control_block& control_;
  std::shared_ptr<backend> backend_;
  std::shared_ptr<memory_resource> stack_;  // the top of the incarnation's resource stack
  core_lock lock_;
  std::atomic<bool> ended_{false};  // set under the lock (end); read anywhere
  /// Calls whose backend call runs. A call counted here never waits for the core lock: post_stop
  /// holds it while it waits for this to reach 0 (`end`).
  std::atomic<std::uint32_t> active_{0};
};

}  // namespace uma::detail
