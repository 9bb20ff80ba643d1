#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace uma::detail {

class cache_slab;

/// Which caching-layer slab holds an address: a two-level radix map over 2 MiB granules of a
/// 48-bit address space, read without a lock (a pointer handed to `uma_free` is looked up on
/// every call). Every slab is at least one granule long, so a granule overlaps at most two
/// slabs. Inserts and erases take a mutex; leaves are allocated on first use and kept.
class slab_map {
 public:
  slab_map();
  ~slab_map();
  slab_map(const slab_map&) = delete;
  slab_map& operator=(const slab_map&) = delete;

  /// Registers [begin, begin + bytes) as `slab`'s. Throws `error(invalid_argument)` for a range
  /// beyond 48-bit addresses or shorter than a granule, `out_of_memory` for a leaf.
  void insert(const std::byte* begin, std::size_t bytes, cache_slab* slab);
  /// Forgets `slab`'s range (no reader may use the slab afterwards: the caller makes sure).
  void erase(const std::byte* begin, std::size_t bytes, const cache_slab* slab) noexcept;
  /// The slab whose range holds `p`, or null.
  [[nodiscard]] cache_slab* find(const void* p) const noexcept;

  static constexpr unsigned granule_shift = 21;

 private:
  static constexpr unsigned leaf_bits = 14;
  static constexpr unsigned root_bits = 48 - granule_shift - leaf_bits;
  struct entry {
    std::atomic<cache_slab*> slot[2] = {nullptr, nullptr};
  };
  struct leaf {
    std::array<entry, std::size_t{1} << leaf_bits> entries;
  };

  std::mutex mutex_;  // writers
  std::unique_ptr<std::atomic<leaf*>[]> root_;
};

}  // namespace uma::detail
