#pragma once

// A callable the memory layer calls back into its owner with (the control block's waker and fatal
// hook: a message to the actor). std::function would do, but <functional> is some 13,000
// preprocessed lines, and this type sits on the include path of every ManagedRef
// (memory/control_block.hpp), which <uma/actors/client.hpp> keeps light.

#include <concepts>
#include <memory>
#include <utility>

namespace uma::detail {

/// A shared, type-erased `void(Args...)` callable: copies call the same object (copying one is
/// an atomic increment, so a hook can be copied out under a lock and called after it). An empty
/// hook is false and must not be called.
template <class... Args>
class hook {
 public:
  hook() noexcept = default;
  /// Holds `f`. Not explicit: like std::function, a lambda converts where a hook is expected.
  template <class F>
  hook(F f)  // NOLINT(google-explicit-constructor)
      requires(!std::same_as<F, hook> && std::invocable<F&, Args...>)
      : fn_(std::make_shared<model<F>>(std::move(f))) {}

  [[nodiscard]] explicit operator bool() const noexcept { return fn_ != nullptr; }
  /// Calls the callable; what it throws goes to the caller.
  void operator()(Args... xs) const { fn_->call(std::forward<Args>(xs)...); }

 private:
  struct callable {
    virtual ~callable() = default;
    virtual void call(Args... xs) = 0;
  };
  template <class F>
  struct model final : callable {
    explicit model(F fn) : f(std::move(fn)) {}
    void call(Args... xs) override { f(std::forward<Args>(xs)...); }
    F f;
  };

  std::shared_ptr<callable> fn_;
};

}  // namespace uma::detail
