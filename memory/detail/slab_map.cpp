#include <uma/memory/detail/slab_map.hpp>

#include <new>
#include <string>

#include <uma/memory/detail/cache_parts.hpp>
#include <uma/sys/error.hpp>

namespace uma::detail {

slab_map::slab_map() : root_(new std::atomic<leaf*>[std::size_t{1} << root_bits]) {
  for (std::size_t i = 0; i < (std::size_t{1} << root_bits); ++i)
    root_[i].store(nullptr, std::memory_order_relaxed);
}

slab_map::~slab_map() {
  for (std::size_t i = 0; i < (std::size_t{1} << root_bits); ++i)
    delete root_[i].load(std::memory_order_relaxed);
}

void slab_map::insert(const std::byte* begin, std::size_t bytes, cache_slab* slab) {
  const auto first = reinterpret_cast<std::uintptr_t>(begin);
  if (bytes < (std::size_t{1} << granule_shift) || first + bytes < first ||
      ((first + bytes - 1) >> 48) != 0)
    raise(errc::invalid_argument, "caching layer: a slab of " + std::to_string(bytes) +
                                      " bytes at " + std::to_string(first) +
                                      " is shorter than 2 MiB or lies beyond 48-bit addresses");
  std::lock_guard lock(mutex_);
  const auto last = (first + bytes - 1) >> granule_shift;
  for (auto g = first >> granule_shift; g <= last; ++g) {
    auto& top = root_[g >> leaf_bits];
    if (top.load(std::memory_order_relaxed) == nullptr) {
      auto* l = new (std::nothrow) leaf;
      if (l == nullptr)
        raise(errc::out_of_memory, "caching layer: no host memory for the slab map");
      top.store(l, std::memory_order_release);
    }
    auto& e = top.load(std::memory_order_relaxed)->entries[g & ((1u << leaf_bits) - 1)];
    // At most two slabs share a granule (each is at least a granule long).
    auto& slot = e.slot[0].load(std::memory_order_relaxed) == nullptr ? e.slot[0] : e.slot[1];
    slot.store(slab, std::memory_order_release);
  }
}

void slab_map::erase(const std::byte* begin, std::size_t bytes, const cache_slab* slab) noexcept {
  const auto first = reinterpret_cast<std::uintptr_t>(begin);
  std::lock_guard lock(mutex_);
  const auto last = (first + bytes - 1) >> granule_shift;
  for (auto g = first >> granule_shift; g <= last; ++g) {
    auto* l = root_[g >> leaf_bits].load(std::memory_order_relaxed);
    if (l == nullptr)
      continue;
    for (auto& slot : l->entries[g & ((1u << leaf_bits) - 1)].slot)
      if (slot.load(std::memory_order_relaxed) == slab)
        slot.store(nullptr, std::memory_order_release);
  }
}

cache_slab* slab_map::find(const void* p) const noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if ((a >> 48) != 0)
    return nullptr;
  const auto g = a >> granule_shift;
  const auto* l = root_[g >> leaf_bits].load(std::memory_order_acquire);
  if (l == nullptr)
    return nullptr;
  for (const auto& slot : l->entries[g & ((1u << leaf_bits) - 1)].slot)
    if (auto* s = slot.load(std::memory_order_acquire); s != nullptr && s->contains(a))
      return s;
  return nullptr;
}

}  // namespace uma::detail
