#include <uma/memory/pool.hpp>

#include <algorithm>

#include <uma/sys/error.hpp>

namespace uma {

block_pool::block_pool(backend& b, std::size_t slab_bytes, std::size_t max_block,
                       attach_flag attach, std::size_t limit, release_fn release)
    : backend_(b),
      page_(std::max<std::size_t>(b.guaranteed_alignment(), 4096)),
      slab_bytes_((slab_bytes + page_ - 1) / page_ * page_),
      max_block_(std::min(max_block, slab_bytes_)),
      attach_(attach),
      limit_(limit),
      release_(std::move(release)) {}

block_pool::block block_pool::allocate(std::size_t bytes) {
  const std::size_t size = rounded(bytes);
  if (auto b = take(size))
    return *b;
  try {
    grow(size);
  } catch (const error& e) {
    if ((e.code() != errc::out_of_memory && e.code() != errc::quota_exceeded) || trim() == 0)
      throw;
    grow(size);  // cached slabs went back: one retry
  }
  return *take(size);
}

std::optional<block_pool::block> block_pool::try_allocate(std::size_t bytes) {
  return take(rounded(bytes));
}

std::optional<block_pool::block> block_pool::take(std::size_t bytes) {
  auto it = by_size_.lower_bound({bytes, {0, 0}});
  if (it == by_size_.end())
    return std::nullopt;
  const auto [size, where] = it->first;
  const auto [s, offset] = where;
  remove_free(s, offset, size);
  if (size > bytes)
    add_free(s, offset + bytes, size - bytes);
  slabs_[s].used += bytes;
  used_ += bytes;
  return block{s, offset, bytes, slabs_[s].base + offset};
}

std::size_t block_pool::growth_for(std::size_t bytes) const {
  const std::size_t at_least = rounded(bytes);
  if (reserved_ + at_least > limit_)
    raise(errc::quota_exceeded, "pool: a slab of " + std::to_string(at_least) +
                                    " bytes would bring reserved bytes to " +
                                    std::to_string(reserved_ + at_least) + ", over the quota of " +
                                    std::to_string(limit_) + " bytes");
  return std::min(std::max(slab_bytes_, at_least), limit_ - reserved_);
}

void block_pool::grow(std::size_t at_least) {
  const std::size_t bytes = growth_for(at_least);
  add_slab(static_cast<std::byte*>(backend_.allocate_managed(bytes, attach_)), bytes);
}

void block_pool::add_slab(std::byte* base, std::size_t bytes) {
  std::uint32_t id = 0;
  while (id < slabs_.size() && slabs_[id].base != nullptr)
    ++id;
  if (id == slabs_.size())
    slabs_.emplace_back();
  slabs_[id] = slab{base, bytes, 0, {}};
  try {
    add_free(id, 0, bytes);
  } catch (...) {
    by_size_.erase(free_key{bytes, {id, 0}});
    slabs_[id] = slab{};  // not recorded: the caller still owns `base`
    throw;
  }
  reserved_ += bytes;
  ++growths_;
}

void block_pool::add_free(std::uint32_t s, std::size_t offset, std::size_t bytes) {
  slabs_[s].free.emplace(offset, bytes);
  by_size_.emplace(free_key{bytes, {s, offset}}, true);
}

void block_pool::remove_free(std::uint32_t s, std::size_t offset, std::size_t bytes) {
  slabs_[s].free.erase(offset);
  by_size_.erase(free_key{bytes, {s, offset}});
}

void block_pool::deallocate(const block& b) noexcept {
  auto& sl = slabs_[b.slab];
  std::size_t offset = b.offset;
  std::size_t bytes = b.bytes;
  sl.used -= b.bytes;
  used_ -= b.bytes;
  // Coalesce with the free neighbour after, then before.
  if (auto next = sl.free.find(offset + bytes); next != sl.free.end()) {
    const auto n = next->second;
    remove_free(b.slab, offset + bytes, n);
    bytes += n;
  }
  if (auto next = sl.free.lower_bound(offset); next != sl.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      const auto p_off = prev->first, p_bytes = prev->second;
      remove_free(b.slab, p_off, p_bytes);
      offset = p_off;
      bytes += p_bytes;
    }
  }
  add_free(b.slab, offset, bytes);
}

std::size_t block_pool::trim() noexcept {
  std::size_t n = 0;
  for (std::uint32_t s = 0; s < slabs_.size(); ++s) {
    auto& sl = slabs_[s];
    if (sl.base == nullptr || sl.used != 0)
      continue;
    remove_free(s, 0, sl.bytes);
    release_(sl.base, sl.bytes);
    reserved_ -= sl.bytes;
    sl = slab{};
    ++n;
    ++trims_;
  }
  return n;
}

void block_pool::release_all(const std::vector<std::uint32_t>& keep) noexcept {
  for (std::uint32_t s = 0; s < slabs_.size(); ++s) {
    auto& sl = slabs_[s];
    if (sl.base == nullptr || std::find(keep.begin(), keep.end(), s) != keep.end())
      continue;
    release_(sl.base, sl.bytes);
    reserved_ -= sl.bytes;
    sl = slab{};
  }
  by_size_.clear();
  used_ = 0;
}

pool_stats block_pool::stats() const noexcept {
  pool_stats s;
  for (const auto& sl : slabs_)
    if (sl.base != nullptr)
      ++s.slabs;
  s.reserved_bytes = reserved_;
  s.used_bytes = used_;
  s.largest_free = by_size_.empty() ? 0 : by_size_.rbegin()->first.first;
  s.slab_growths = growths_;
  s.trims = trims_;
  return s;
}

}  // namespace uma
