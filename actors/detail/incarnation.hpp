#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/detail/incarnation_state.hpp>
#include <uma/memory/control_block.hpp>
#include <uma/messages/caller_calls.hpp>
#include <uma/sys/detail/spin_mutex.hpp>
#include <uma/sys/worker_lanes.hpp>

namespace uma::detail {

struct failure;

/// An allocator incarnation (docs/design.md "The incarnation"): the control block, the worker
/// lanes, the resource stack's top, and the state under its lock (incarnation_state), reachable
/// only through a guard. The actor holds one while it runs (each resume); a caller call holds
/// one for each part that reads or changes the state and makes its backend call with none held.
/// Each request is one operation (actors/detail/operations.hpp) that both run.
class incarnation final : public caller_calls {
 public:
  /// The lock held, and the state it guards. Move-only.
  class guard {
   public:
    guard(guard&& other) noexcept
        : lock_(std::exchange(other.lock_, nullptr)), state_(other.state_) {}
    guard(const guard&) = delete;
    guard& operator=(const guard&) = delete;
    guard& operator=(guard&&) = delete;
    ~guard() {
      if (lock_ != nullptr)
        lock_->unlock();
    }
    [[nodiscard]] incarnation_state* operator->() const noexcept { return state_; }
    [[nodiscard]] incarnation_state& operator*() const noexcept { return *state_; }

   private:
    friend class incarnation;
    guard(spin_mutex& lock, incarnation_state* state) noexcept : lock_(&lock), state_(state) {}
    spin_mutex* lock_;
    incarnation_state* state_;
  };

  incarnation(allocator_config config, std::shared_ptr<backend> b);
  incarnation(const incarnation&) = delete;
  incarnation& operator=(const incarnation&) = delete;
  /// `close`, if the stop did not run.
  ~incarnation() override;

  /// A caller's guard: waits for the lock until `until` (then throws timeout); throws
  /// allocator_stopped once the incarnation has ended.
  [[nodiscard]] guard locked(deadline until);
  /// The actor's guard: waits as long as it takes.
  [[nodiscard]] guard locked() noexcept;

  [[nodiscard]] std::optional<byte_ref> allocate(const allocate_request& r,
                                                 deadline until) override;
  [[nodiscard]] std::optional<op_result> prefetch(const prefetch_request& r, bool discard_first,
                                                  deadline until) override;
  [[nodiscard]] std::optional<op_result> advise(const advise_request& r, deadline until) override;
  [[nodiscard]] range_attributes attributes(const byte_ref& ref, deadline until) override;
  [[nodiscard]] std::optional<allocator_stats> stats(deadline until) override;
  [[nodiscard]] bool ended() const noexcept override;

  // -- the actor's side ---------------------------------------------------------------------------

  [[nodiscard]] const std::shared_ptr<backend>& runtime() const noexcept { return backend_; }
  [[nodiscard]] control_block& control() noexcept { return *control_; }
  /// The stop sequence (actors/detail/allocator_stop.hpp) under `g`: no caller call starts from
  /// now on, those whose backend call runs are waited for, then `close`. Once only.
  void stop(guard& g) noexcept;

 private:
  /// Runs `part` under a caller's guard; what it throws is counted there, then rethrown
  /// (after a fatal error is reported, with no lock held).
  template <class Part>
  auto under(deadline until, Part&& part);
  /// The caller's executor of an operation (`make`: a detail::*_step for `r`); nullopt, with
  /// nothing changed, when the request must wait its turn (detail::waits_its_turn).
  template <class Request, class Make>
  auto run_here(deadline until, const Request& r, Make&& make);
  /// A backend call made with no lock held failed: `undo` and the count under a guard (best
  /// effort: the stop or the deadline may come first), then thrown as raise_after throws.
  template <class Undo>
  [[noreturn]] void count_then_raise(const failure& f, deadline until, Undo&& undo);
  /// Throws `f`, after reporting a fatal one to the control block (no lock held: the actor
  /// quits on it).
  [[noreturn]] void raise_after(const failure& f);
  /// A region refused on the caller's thread: the actor's one more try, waited for here.
  [[nodiscard]] allocation retry_on_lane(const allocation_request& req, deadline until);
  /// A backend call counted in `active_` has returned (before any lock is taken again).
  void finished() noexcept;
  /// Joins the lanes, then destroys the state their jobs reach: in this order, stated here
  /// rather than left to the members' declaration order.
  void close() noexcept;

  allocator_config config_;
  std::shared_ptr<backend> backend_;
  std::shared_ptr<control_block> control_;
  worker_lanes lanes_;
  spin_mutex lock_;
  std::unique_ptr<incarnation_state> state_;  // made by the constructor, destroyed by close
  std::shared_ptr<memory_resource> stack_;    // the top of the resource stack
  std::atomic<bool> ended_{false};            // set under the lock (stop); read anywhere
  /// Caller calls whose backend call runs. A call counted here never waits for the lock: the
  /// stop holds it while it waits for this to reach 0.
  std::atomic<std::uint32_t> active_{0};
};

}  // namespace uma::detail
