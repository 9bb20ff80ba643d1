#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include <uma/memory/resource_adaptor.hpp>

namespace uma {

/// Counters of a pool_resource.
struct pool_stats {
  std::uint64_t slabs = 0;
  std::uint64_t reserved_bytes = 0;  ///< bytes held in slabs from the upstream
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

/// uma's sub-allocator over large slabs from its upstream: page-aligned, page-rounded blocks
/// (advice and prefetch act on whole pages, so a block never shares a page with another block),
/// best fit from a size-ordered free list, coalescing of neighbours on free, growth by a slab
/// (or more for a larger request) within the upstream's headroom, trim on request. Requests
/// above `max_block`, aligned beyond a page or attached to the host go to the upstream as they
/// are. When the upstream refuses (out_of_memory or quota_exceeded) it gives its completely free
/// slabs back and retries once: the only retry of uma.
///
/// Thread-safe: one mutex, released around every upstream call, so that a growth on one thread
/// (the allocator's general lane) never blocks try_allocate/deallocate on another (the actor).
class pool_resource final : public resource_adaptor {
 public:
  /// Slabs of `slab_bytes` (rounded to a page) from `upstream`; blocks up to `max_block`.
  pool_resource(memory_resource& upstream, std::size_t slab_bytes, std::size_t max_block);
  /// Gives nothing back: slabs still held stay mapped (the allocator's post_stop calls
  /// release_all, keeping slabs under pinned blocks on purpose).
  ~pool_resource() override = default;

  /// True when `r` is served from slabs (else it goes to the upstream unchanged).
  [[nodiscard]] bool serves(const allocation_request& r) const noexcept {
    return r.poolable && r.bytes <= max_block_ && r.alignment <= page_ &&
           r.attach == attach_flag::global;
  }
  /// Gives every slab back except those in `keep` (slabs holding leaked blocks: post_stop).
  /// A block of a slab given back here is later ignored by deallocate: it went with its slab.
  void release_all(const std::vector<std::uint32_t>& keep) noexcept;
  /// The counters now.
  [[nodiscard]] pool_stats stats() const;
  /// The block unit.
  [[nodiscard]] std::size_t page() const noexcept { return page_; }

 protected:
  allocation do_allocate(const allocation_request& r) override;
  /// A block from the slabs held, or nullopt when a slab must be added (or, for a request the
  /// pool does not serve, when the upstream refused and empty slabs could make room).
  std::optional<allocation> do_try_allocate(const allocation_request& r) override;
  void do_deallocate(const allocation& a) noexcept override;
  /// Page-rounded for a request the pool serves (attached globally); else the upstream's.
  [[nodiscard]] std::size_t do_charge_for(std::size_t bytes, std::size_t alignment) const override;
  std::size_t do_trim() noexcept override;

 private:
  struct slab {
    allocation memory{};  // what the upstream returned; memory.data == null: given back
    std::size_t used = 0;
    std::map<std::size_t, std::size_t> free;  // offset -> bytes
  };
  using free_key = std::pair<std::size_t, std::pair<std::uint32_t, std::size_t>>;  // size, where

  template <class F>
  allocation with_retry(F&& upstream_call);
  allocation grow_and_take(const allocation_request& r, std::size_t bytes);
  [[nodiscard]] std::size_t growth_for(std::size_t bytes) const noexcept;
  std::optional<allocation> take(const allocation_request& r, std::size_t bytes);  // locked
  void add_slab(const allocation& memory);                                         // locked
  void add_free(std::uint32_t s, std::size_t offset, std::size_t bytes);
  void remove_free(std::uint32_t s, std::size_t offset, std::size_t bytes);
  [[nodiscard]] bool has_empty_slab() const;

  std::size_t page_;
  std::size_t slab_bytes_;
  std::size_t max_block_;
  mutable std::mutex mutex_;
  std::vector<slab> slabs_;           // index = slab id
  std::map<free_key, bool> by_size_;  // best fit: smallest size, then lowest address
  std::uint64_t used_ = 0, reserved_ = 0, growths_ = 0, trims_ = 0;
  bool released_ = false;  // release_all ran: blocks coming back after it are ignored
};

}  // namespace uma
