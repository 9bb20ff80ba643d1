#pragma once

// The block allocator's give-back path (memory/block_allocator.cpp): what leaves the slab
// registry and the shards' free lists, and when. A trim takes the idle slabs out (`idle_slabs`)
// under every lock and gives them back to the actor after; the incarnation's end lets go of
// every slab (`let_go_all`). The hot path (hand-out, return) never comes here.

#include <cstdint>
#include <vector>

namespace uma::detail {

class slab;
class slab_registry;
struct block;
struct block_shard;

/// The slabs a trim takes out of the block allocator: those whose blocks are all free and done
/// with on their streams (events checked, never waited for), with their free blocks. Unlinked
/// under the locks, given back outside them (`give_back`, or the destructor): each slab drops
/// its count of its region, and the actor frees it like any released region.
class idle_slabs {
 public:
  idle_slabs() = default;
  idle_slabs(idle_slabs&& other) noexcept;
  idle_slabs& operator=(idle_slabs&& other) noexcept;
  idle_slabs(const idle_slabs&) = delete;
  idle_slabs& operator=(const idle_slabs&) = delete;
  /// Gives back what `give_back` has not.
  ~idle_slabs();

  /// Takes the idle slabs off `registry` and their blocks off the free lists of `shards` (all
  /// `block_shards` of them). Expects the registry's lock and every shard's held (and no slab
  /// carved meanwhile). Throws std::bad_alloc with nothing changed.
  [[nodiscard]] static idle_slabs unlink(slab_registry& registry, block_shard* shards);

  /// Their bytes.
  [[nodiscard]] std::uint64_t bytes() const noexcept;
  /// Destroys the free blocks' events and deletes the slabs (their regions go back to the
  /// actor); returns their bytes. With no lock held: event calls are backend calls, and the last
  /// slab may hold the last other ref to the block allocator (the caller holds one meanwhile).
  std::uint64_t give_back() noexcept;

 private:
  std::vector<slab*> slabs_;
  std::vector<block*> free_blocks_;
};

/// The incarnation's end (`block_allocator::close`): every free block's event destroyed, the free
/// lists emptied, every slab taken out of `registry` and let go (unpinned: post_stop has decided
/// what to leak), raw blocks out given up; a slab with no block out is deleted now, any other by
/// its last block coming back (`block_allocator::put_back`). Expects the registry's lock and
/// every shard's held.
void let_go_all(slab_registry& registry, block_shard* shards) noexcept;

}  // namespace uma::detail
