#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <uma/memory/backend_resource.hpp>
#include <uma/memory/limit_resource.hpp>
#include <uma/memory/statistics_resource.hpp>
#include <uma/memory/tracking_resource.hpp>

namespace uma {

/// How the allocator serves a typed allocate request. The stack is the same for both
/// (tracking > statistics > limit > backend); the block allocator (memory/block_allocator.hpp)
/// sits above it either way and serves the facade's small requests under both.
enum class allocation_policy : std::uint8_t {
  direct,  ///< every request is a region of its own: one backend allocation
  pool,    ///< a request the block allocator serves is one of its blocks; larger ones direct
};

/// What an allocator's memory is composed from (an allocator_config's `memory`): the stack's
/// quota, and the block allocator's sizes.
struct resource_stack_config {
  /// How typed requests are served: `direct` (every region is its own allocation) or `pool`.
  allocation_policy policy = allocation_policy::direct;
  /// Most bytes held from the backend at once (the block allocator's slabs and direct regions:
  /// memory/limit_resource.hpp); 0 takes the backend's default quota.
  std::uint64_t quota_bytes = 0;
  /// Bytes of one slab of the block allocator (a miss carves this much into blocks of its
  /// size class; at least one block).
  std::size_t slab_bytes = std::size_t{4} << 20;
  /// The largest request the block allocator serves (larger ones are regions of their own).
  std::size_t max_pooled_block = std::size_t{16} << 20;
};

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
