#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <uma/memory/backend_resource.hpp>
#include <uma/memory/limit_resource.hpp>
#include <uma/memory/resource_stack_config.hpp>
#include <uma/memory/statistics_resource.hpp>
#include <uma/memory/tracking_resource.hpp>

namespace uma {

/// One composed stack: owns every layer (bottom first, so each outlives the one above it) and
/// gives typed access to those the allocator steers. Thread-safe as its layers are.
class resource_stack {
 public:
  /// Composes the stack over `b` with `config.quota_bytes`.
  resource_stack(std::shared_ptr<backend> b, const resource_stack_config& config);
  resource_stack(const resource_stack&) = delete;
  resource_stack& operator=(const resource_stack&) = delete;

  /// The top: every allocate and deallocate goes through it.
  [[nodiscard]] memory_resource& top() noexcept { return *tracking_; }
  /// The quota.
  [[nodiscard]] limit_resource& limit() noexcept { return *limit_; }
  [[nodiscard]] const limit_resource& limit() const noexcept { return *limit_; }
  /// Counters of what the stack handed out.
  [[nodiscard]] statistics_resource& statistics() noexcept { return *statistics_; }
  [[nodiscard]] const statistics_resource& statistics() const noexcept { return *statistics_; }
  /// Outstanding allocations and their labels.
  [[nodiscard]] tracking_resource& tracking() noexcept { return *tracking_; }
  [[nodiscard]] const tracking_resource& tracking() const noexcept { return *tracking_; }

 private:
  std::unique_ptr<backend_resource> backend_;
  std::unique_ptr<limit_resource> limit_;
  std::unique_ptr<statistics_resource> statistics_;
  std::unique_ptr<tracking_resource> tracking_;
};

/// A shared stack (an allocation in transit keeps it alive: memory/allocation_handoff.hpp).
[[nodiscard]] std::shared_ptr<resource_stack> make_resource_stack(
    std::shared_ptr<backend> b, const resource_stack_config& config);

}  // namespace uma
