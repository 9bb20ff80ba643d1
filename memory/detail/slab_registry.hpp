#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_set>
#include <vector>

#include <uma/sys/detail/spin_mutex.hpp>

namespace uma::detail {

class control_block;
class slab;
struct block;

/// The block allocator's slabs, apart from its sharded hand-out: the list of slabs it holds,
/// the address map that finds a raw pointer's block, their bytes; a slab joining is queued for
/// the actor in the same locked section. Its lock is taken before any shard's
/// (`block_allocator`); every member but `lock` expects it held (a `lock()` guard).
class slab_registry {
 public:
  /// The registry's lock (spinning: held for a lookup or a list edit, never across a backend call).
  [[nodiscard]] std::unique_lock<spin_mutex> lock() const { return std::unique_lock(mutex_); }

  /// Adds a slab just carved and queues it on `control` for the actor's table (which takes it
  /// before any release of it). Throws std::bad_alloc with nothing changed.
  void add(slab* s, control_block& control);
  /// The raw block out that starts at `p`, or null.
  [[nodiscard]] block* raw_block_at(const void* p) const noexcept;
  /// The raw block out that holds [p, p + bytes), or null.
  [[nodiscard]] block* raw_block_holding(const void* p, std::size_t bytes) const noexcept;
  /// Takes the slabs in `idle` out of the registry (trim) and marks them let go; returns them.
  [[nodiscard]] std::vector<slab*> remove(const std::unordered_set<const slab*>& idle);
  /// Unpins the slabs with no block out (before a stop: post_stop frees them).
  void unpin_idle() noexcept;
  /// Every slab, taken out (the incarnation's end).
  [[nodiscard]] std::vector<slab*> take_all() noexcept;
  [[nodiscard]] std::size_t count() const noexcept { return slabs_.size(); }
  [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_; }

 private:
  /// The slab whose memory holds `p`, or null.
  [[nodiscard]] slab* holding(const void* p) const noexcept;

  mutable spin_mutex mutex_;
  std::vector<slab*> slabs_;
  std::map<std::uintptr_t, slab*> by_address_;  // slab begin -> slab (raw lookups)
  std::uint64_t bytes_ = 0;
};

}  // namespace uma::detail
