#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include <uma/sys/detail/spin_mutex.hpp>

namespace uma::detail {

struct block;

/// The block allocator's shards (threads spread over them round robin).
inline constexpr std::size_t block_shards = 16;

/// One shard of the block allocator's free lists: per (device, stream), one list per size
/// class, and the counters of what went through it. A thread takes blocks from its own shard
/// (threads are spread over them round robin) and looks into the others only when its own has
/// no block of the class; a block goes back to the shard it came from. So threads allocating at
/// once do not queue on one lock: with one lock for all, eight threads taking 64 KiB blocks on
/// the H100 VM spent a median of 6-7 µs a pair against 0.19-0.26 µs for the per-thread-sharded
/// cache it replaced (uma_native_bench, same run; docs/performance.md). Every member but
/// `mutex` is guarded by it.
struct alignas(64) block_shard {
  struct stream_pool {
    int device = 0;
    void* stream = nullptr;
    std::vector<block*> heads;  // one free list per size class
  };

  mutable spin_mutex mutex;
  std::vector<stream_pool> pools;
  std::size_t last_pool = 0;
  std::int64_t in_use = 0, requested = 0, free = 0, blocks = 0;  // may go below 0: summed
  std::uint64_t hits = 0, misses = 0, cross = 0, events = 0;

  /// The pool of (`device`, `stream`), made with `classes` empty lists on first use.
  [[nodiscard]] stream_pool& pool_of(int device, void* stream, std::uint32_t classes);
  /// A free block of class `cls` for (`device`, `stream`): its own stream's first, else one
  /// whose last stream finished with it (an event checked, never waited for); null if none.
  [[nodiscard]] block* pop(std::uint32_t cls, int device, void* stream, std::uint32_t classes);
  /// Puts a free block on the list of its (device, stream) and class.
  void list(block& b, std::uint32_t cls, std::uint32_t classes) noexcept;
};

/// Every shard's lock, held.
using shard_locks = std::array<std::unique_lock<spin_mutex>, block_shards>;
/// Every shard of `shards` locked, in index order (after the slab registry's lock, if that is
/// taken too): what the give-back path (trim, seal, close) holds.
[[nodiscard]] shard_locks lock_shards(block_shard* shards);

/// Whether free block `b`, last used on another stream, may be handed out now: it is clean,
/// or the event recorded after its free completed (recorded now, on a lasting stream).
[[nodiscard]] bool ready_elsewhere(block& b, std::uint64_t& events_recorded) noexcept;

}  // namespace uma::detail
