#pragma once

#include <memory>
#include <optional>

#include <uma/memory/memory_resource.hpp>

namespace uma {

/// An allocation in transit from the thread that made it (the allocator's general lane) to its
/// owner (the actor), as the payload of the job's reply. Copies share one allocation; whoever
/// `take`s it owns it. If nobody does — the owner stopped and the reply was dropped — the last
/// copy gives it back to its resource, so a growth that finishes after a stop leaks nothing.
class allocation_handoff {
 public:
  /// Empty (CAF's messages default-construct their elements).
  allocation_handoff() = default;
  /// Hands over `a`, to go back to `owner` unless taken. `owner` is kept alive by the handoff.
  allocation_handoff(std::shared_ptr<memory_resource> owner, const allocation& a);

  /// The allocation, once: nullopt when empty or already taken.
  [[nodiscard]] std::optional<allocation> take() noexcept;

 private:
  struct state {
    std::shared_ptr<memory_resource> owner;
    allocation memory;
    bool taken = false;
    ~state();
  };
  std::shared_ptr<state> state_;
};

}  // namespace uma
