#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include <uma/memory/detail/cache_parts.hpp>
#include <uma/memory/detail/slab_map.hpp>
#include <uma/memory/stream_cache.hpp>

namespace uma::detail {

/// The state behind a `stream_cache` (memory/stream_cache.hpp): shards of free lists, the
/// leases (slabs) and, in raw mode, the address map. Counted: the handle holds one count and
/// every slab one, so a block dropped after the cache closed still finds its way back.
class cache_core {
 public:
  static constexpr std::size_t shard_count = 16;

  cache_core(lease_source source, stream_cache_config config);
  cache_core(const cache_core&) = delete;
  cache_core& operator=(const cache_core&) = delete;

  void retain() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1)
      delete this;
  }

  [[nodiscard]] const stream_cache_config& config() const noexcept { return config_; }
  [[nodiscard]] std::uint32_t class_of(std::size_t bytes) const noexcept;
  [[nodiscard]] std::uint32_t class_count() const noexcept { return classes_; }

  /// A block of class `cls` for (`device`, `stream`), marked handed out; throws what growth
  /// throws.
  [[nodiscard]] cache_block* take(std::uint32_t cls, std::size_t requested, int device,
                                  void* stream);
  /// Takes a block that was handed out off the counters (it leaves the cache).
  void uncount(const cache_block* b) noexcept;
  /// A block that came back from (`device`, `stream`): into this thread's shard.
  void put(cache_block* b, int device, void* stream) noexcept;
  /// The raw block starting at `p` and handed out, or null.
  [[nodiscard]] cache_block* raw_block(const void* p) const noexcept;
  [[nodiscard]] cache_block* raw_block_holding(const void* p, std::size_t bytes) const noexcept;
  /// Registers a new slab's range (raw mode).
  void map_slab(cache_slab* s) { map_.insert(s->begin(), s->bytes(), s); }
  [[nodiscard]] bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }

  void prepare_stop() noexcept;
  /// Gives everything back and drops the handle's count.
  void close() noexcept;
  [[nodiscard]] stream_cache_stats stats() const;

  /// Gives up a block: raw mode drops the cache's count (which comes back through the slab),
  /// refs mode gives it to its lease. May end the lease.
  void discard(cache_block* b) noexcept;
  /// close(), under grow_mutex_: lets every slab go (raw blocks still out keep theirs pinned).
  void close_slabs() noexcept;
  /// Destroys the block's event and returns it to its lease's own free list (may end the lease).
  void give_to_lease(cache_block* b) noexcept;
  /// Lets go of every lease whose blocks are all free and finished on their streams; returns
  /// their bytes. Blocks still out, or whose stream has not finished with them, keep theirs.
  [[nodiscard]] std::uint64_t trim();
  /// A trimmed raw slab whose lease ended: kept (not deleted) until the core goes, since a
  /// stale pointer's lookup may still be reading it. Called from the slab's lease_ended.
  void retire(cache_slab* s) noexcept;

 private:
  ~cache_core();

  struct stream_bins {
    int device = 0;
    void* stream = nullptr;
    std::vector<cache_block*> heads;  // one free list per size class
  };
  struct alignas(64) shard {
    mutable std::mutex mutex;
    std::vector<stream_bins> streams;
    std::size_t last = 0;  // the bins found last
    std::int64_t in_use = 0, requested = 0, free = 0, blocks = 0;
    std::uint64_t hits = 0, misses = 0, cross = 0, events = 0;
  };

  [[nodiscard]] shard& my_shard() noexcept;
  [[nodiscard]] stream_bins& bins_of(shard& s, int device, void* stream);
  [[nodiscard]] cache_block* pop_same(shard& s, std::uint32_t cls, int device, void* stream);
  [[nodiscard]] cache_block* pop_other(shard& s, std::uint32_t cls, int device, void* stream);
  [[nodiscard]] bool ready_elsewhere(shard& s, cache_block* b) noexcept;
  [[nodiscard]] cache_block* steal(shard& mine, std::uint32_t cls, int device, void* stream);
  [[nodiscard]] cache_block* grow(shard& s, std::uint32_t cls, std::size_t requested, int device,
                                  void* stream);
  void hand_out(shard& s, cache_block* b, std::size_t requested, int device, void* stream);
  void prune_dead() noexcept;  // grow_mutex_ held

  lease_source source_;
  const stream_cache_config config_;
  const std::uint32_t classes_;
  std::atomic<std::int64_t> refs_{1};
  std::atomic<bool> closed_{false};
  shard shards_[shard_count];
  mutable std::mutex grow_mutex_;   // one lease request at a time; guards slabs_
  std::vector<cache_slab*> slabs_;  // the slabs whose lease the cache holds
  std::mutex retired_mutex_;
  std::vector<cache_slab*> retired_;  // trimmed raw slabs (see retire)
  slab_map map_;
};

}  // namespace uma::detail
