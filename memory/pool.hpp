#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include <uma/sys/backend.hpp>

namespace uma {

/// Counters of a block pool.
struct pool_stats {
  std::uint64_t slabs = 0;
  std::uint64_t reserved_bytes = 0;  ///< bytes held in slabs from the backend
  std::uint64_t used_bytes = 0;      ///< bytes in handed-out blocks (page-rounded)
  std::uint64_t largest_free = 0;    ///< largest free block
  std::uint64_t slab_growths = 0;
  std::uint64_t trims = 0;  ///< slabs given back
  /// 1 - largest_free / free bytes: 0 when all free space is one block.
  [[nodiscard]] double fragmentation() const noexcept {
    const auto free = reserved_bytes - used_bytes;
    return free == 0 ? 0.0 : 1.0 - static_cast<double>(largest_free) / static_cast<double>(free);
  }
};

/// uma's sub-allocator over large managed slabs: page-aligned, page-rounded blocks (advice and
/// prefetch act on whole pages, so a block never shares a page with another block), best-fit
/// from a size-ordered free list, coalescing of neighbours on free, growth on demand, trim on
/// request, and on out-of-memory one retry after giving cached slabs back. Actor-thread only.
class block_pool {
 public:
  /// Where a block lives.
  struct block {
    std::uint32_t slab = 0;
    std::size_t offset = 0;
    std::size_t bytes = 0;  ///< page-rounded
    std::byte* data = nullptr;
  };

  /// Gives a slab's memory back (the allocator hands cudaFree to its worker).
  using release_fn = std::function<void(void* base, std::size_t bytes)>;

  /// `slab_bytes` (a page multiple) is the growth unit; requests above `max_block` are not
  /// pooled (the caller allocates them directly). Slabs never reserve more than `limit` bytes
  /// in all (the allocator's quota); `release` gives a slab back.
  block_pool(backend& b, std::size_t slab_bytes, std::size_t max_block, attach_flag attach,
             std::size_t limit, release_fn release);
  block_pool(const block_pool&) = delete;
  block_pool& operator=(const block_pool&) = delete;
  /// Frees every slab (those still holding leaked blocks excepted: see release_all).
  ~block_pool() = default;

  /// True when a request of `bytes` with `alignment` is served by the pool.
  [[nodiscard]] bool serves(std::size_t bytes, std::size_t alignment) const noexcept {
    return bytes <= max_block_ && alignment <= page_;
  }
  /// A block of at least `bytes`. Grows by a slab when nothing fits; when the backend is out of
  /// memory (or the limit is reached), gives cached empty slabs back and retries once. Throws
  /// the backend's error, or `quota_exceeded` when even then the limit leaves no room.
  [[nodiscard]] block allocate(std::size_t bytes);
  /// A block of at least `bytes` from the slabs already held, or nullopt (no backend call).
  [[nodiscard]] std::optional<block> try_allocate(std::size_t bytes);
  /// The size of the slab to add so that a request of `bytes` fits: the growth unit, or more
  /// for a larger request, within the limit. Throws `quota_exceeded` when the limit leaves no
  /// room. With add_slab, lets the caller make the backend call elsewhere (the allocator's
  /// worker), so that growth never blocks the actor.
  [[nodiscard]] std::size_t growth_for(std::size_t bytes) const;
  /// Adds a slab of `bytes` (from growth_for) that the backend returned at `base`. All or
  /// nothing: when it throws (host memory), the pool does not hold the slab.
  void add_slab(std::byte* base, std::size_t bytes);
  /// Returns a block; it coalesces with free neighbours.
  void deallocate(const block& b) noexcept;
  /// Gives every completely free slab back to the backend; returns how many.
  std::size_t trim() noexcept;
  /// Frees every slab except those in `keep` (slabs holding leaked blocks). post_stop only.
  void release_all(const std::vector<std::uint32_t>& keep) noexcept;

  [[nodiscard]] pool_stats stats() const noexcept;
  [[nodiscard]] std::size_t page() const noexcept { return page_; }

 private:
  struct slab {
    std::byte* base = nullptr;
    std::size_t bytes = 0;
    std::size_t used = 0;
    std::map<std::size_t, std::size_t> free;  // offset -> bytes
  };
  using free_key = std::pair<std::size_t, std::pair<std::uint32_t, std::size_t>>;  // size, where

  [[nodiscard]] std::size_t rounded(std::size_t bytes) const noexcept {
    return (bytes + page_ - 1) / page_ * page_;
  }
  std::optional<block> take(std::size_t bytes);
  void grow(std::size_t at_least);
  void add_free(std::uint32_t s, std::size_t offset, std::size_t bytes);
  void remove_free(std::uint32_t s, std::size_t offset, std::size_t bytes);

  backend& backend_;
  std::size_t page_;
  std::size_t slab_bytes_;
  std::size_t max_block_;
  attach_flag attach_;
  std::size_t limit_;
  release_fn release_;
  std::vector<slab> slabs_;           // index = slab id; freed slabs have base == null
  std::map<free_key, bool> by_size_;  // best fit: smallest size, then lowest address
  std::uint64_t used_ = 0, reserved_ = 0, growths_ = 0, trims_ = 0;
};

}  // namespace uma
