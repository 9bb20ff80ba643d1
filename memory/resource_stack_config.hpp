#pragma once

// What an allocator's memory is composed from, as a config names it: without the stack's
// classes (memory/resource_stack.hpp), so that a configuration pulls in none of them.

#include <cstddef>
#include <cstdint>

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

}  // namespace uma
