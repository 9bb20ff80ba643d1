#include <uma/memory/pool_resource.hpp>

#include <algorithm>

#include <uma/memory/detail/round_up.hpp>
#include <uma/sys/error.hpp>

namespace uma {

namespace {

/// The upstream refusals that cached empty slabs may cure.
bool retryable(const error& e) noexcept {
  return e.code() == errc::out_of_memory || e.code() == errc::quota_exceeded;
}

}  // namespace

pool_resource::pool_resource(memory_resource& upstream, std::size_t slab_bytes,
                             std::size_t max_block)
    : resource_adaptor(upstream),
      page_(upstream.properties().page),
      slab_bytes_(detail::round_up(std::max<std::size_t>(slab_bytes, 1), page_)),
      max_block_(std::min(max_block, slab_bytes_)) {}

std::size_t pool_resource::do_charge_for(std::size_t bytes, std::size_t alignment) const {
  if (bytes <= max_block_ && alignment <= page_)
    return detail::round_up(bytes, page_);
  return upstream().charge_for(bytes, alignment);
}

template <class F>
allocation pool_resource::with_retry(F&& upstream_call) {
  try {
    return upstream_call();
  } catch (const error& e) {
    if (!retryable(e) || do_trim() == 0)
      throw;
  }
  return upstream_call();  // cached slabs went back: one retry
}

allocation pool_resource::do_allocate(const allocation_request& r) {
  if (!serves(r))
    return with_retry([&] { return upstream().allocate(r); });
  const std::size_t bytes = detail::round_up(r.bytes, page_);
  {
    std::lock_guard lock(mutex_);
    if (auto a = take(r, bytes))
      return *a;
  }
  return with_retry([&] { return grow_and_take(r, bytes); });
}

std::optional<allocation> pool_resource::do_try_allocate(const allocation_request& r) {
  if (serves(r)) {
    const std::size_t bytes = detail::round_up(r.bytes, page_);
    std::lock_guard lock(mutex_);
    return take(r, bytes);
  }
  try {
    return upstream().try_allocate(r);
  } catch (const error& e) {
    if (retryable(e) && has_empty_slab())
      return std::nullopt;  // allocate trims first: not on this (the actor's) thread
    throw;
  }
}

std::size_t pool_resource::growth_for(std::size_t bytes) const noexcept {
  const std::size_t room = upstream().available() / page_ * page_;
  if (room < bytes)
    return bytes;  // the upstream refuses it, naming its limit
  return std::min(std::max(slab_bytes_, bytes), room);
}

allocation pool_resource::grow_and_take(const allocation_request& r, std::size_t bytes) {
  {
    std::lock_guard lock(mutex_);  // a block may have come back since the first look
    if (auto a = take(r, bytes))
      return *a;
  }
  // The upstream call runs unlocked: the actor thread keeps taking and returning blocks.
  const auto memory = upstream().allocate(
      {growth_for(bytes), upstream().properties().alignment, attach_flag::global, "pool slab"});
  try {
    std::lock_guard lock(mutex_);
    add_slab(memory);
    return *take(r, bytes);
  } catch (...) {
    upstream().deallocate(memory);  // host memory ran out recording it: the slab goes back
    throw;
  }
}

std::optional<allocation> pool_resource::take(const allocation_request& r, std::size_t bytes) {
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
  auto* data = slabs_[s].memory.data + offset;
  return allocation{data, data, r.bytes, bytes, s, offset};
}

void pool_resource::add_slab(const allocation& memory) {
  std::uint32_t id = 0;
  while (id < slabs_.size() && slabs_[id].memory.data != nullptr)
    ++id;
  if (id == slabs_.size())
    slabs_.emplace_back();
  slabs_[id] = slab{memory, 0, {}};
  try {
    add_free(id, 0, memory.bytes);
  } catch (...) {
    by_size_.erase(free_key{memory.bytes, {id, 0}});
    slabs_[id] = slab{};  // not recorded: the caller gives the memory back
    throw;
  }
  reserved_ += memory.bytes;
  ++growths_;
}

void pool_resource::add_free(std::uint32_t s, std::size_t offset, std::size_t bytes) {
  slabs_[s].free.emplace(offset, bytes);
  by_size_.emplace(free_key{bytes, {s, offset}}, true);
}

void pool_resource::remove_free(std::uint32_t s, std::size_t offset, std::size_t bytes) {
  slabs_[s].free.erase(offset);
  by_size_.erase(free_key{bytes, {s, offset}});
}

void pool_resource::do_deallocate(const allocation& a) noexcept {
  if (!a.pooled()) {
    upstream().deallocate(a);
    return;
  }
  std::lock_guard lock(mutex_);
  if (released_ || a.slab >= slabs_.size() || slabs_[a.slab].memory.data == nullptr)
    return;  // after release_all (an allocation that arrived after a stop): nothing is reused
  auto& sl = slabs_[a.slab];
  std::size_t offset = a.offset;
  std::size_t bytes = a.charged;
  sl.used -= a.charged;
  used_ -= a.charged;
  // Coalesce with the free neighbour after, then before.
  if (auto next = sl.free.find(offset + bytes); next != sl.free.end()) {
    const auto n = next->second;
    remove_free(a.slab, offset + bytes, n);
    bytes += n;
  }
  if (auto next = sl.free.lower_bound(offset); next != sl.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      const auto p_off = prev->first, p_bytes = prev->second;
      remove_free(a.slab, p_off, p_bytes);
      offset = p_off;
      bytes += p_bytes;
    }
  }
  add_free(a.slab, offset, bytes);
}

bool pool_resource::has_empty_slab() const {
  std::lock_guard lock(mutex_);
  return std::any_of(slabs_.begin(), slabs_.end(),
                     [](const slab& s) { return s.memory.data != nullptr && s.used == 0; });
}

std::size_t pool_resource::do_trim() noexcept {
  std::vector<allocation> empty;
  {
    std::lock_guard lock(mutex_);
    for (std::uint32_t s = 0; s < slabs_.size(); ++s) {
      auto& sl = slabs_[s];
      if (sl.memory.data == nullptr || sl.used != 0)
        continue;
      try {
        empty.push_back(sl.memory);
      } catch (...) {
        break;  // out of host memory: the rest stays cached
      }
      remove_free(s, 0, sl.memory.bytes);
      reserved_ -= sl.memory.bytes;
      sl = slab{};
      ++trims_;
    }
  }
  for (const auto& m : empty)  // unlocked: a backend free may synchronize the device
    upstream().deallocate(m);
  return empty.size();
}

void pool_resource::release_all(const std::vector<std::uint32_t>& keep) noexcept {
  std::lock_guard lock(mutex_);  // post_stop only: nothing else runs, the frees may run locked
  for (std::uint32_t s = 0; s < slabs_.size(); ++s) {
    auto& sl = slabs_[s];
    if (sl.memory.data == nullptr || std::find(keep.begin(), keep.end(), s) != keep.end())
      continue;
    upstream().deallocate(sl.memory);
    reserved_ -= sl.memory.bytes;
    sl = slab{};
  }
  by_size_.clear();
  for (auto& sl : slabs_)
    sl.free.clear();  // a kept slab serves nothing more
  used_ = 0;
  released_ = true;
}

pool_stats pool_resource::stats() const {
  std::lock_guard lock(mutex_);
  pool_stats s;
  for (const auto& sl : slabs_)
    if (sl.memory.data != nullptr)
      ++s.slabs;
  s.reserved_bytes = reserved_;
  s.used_bytes = used_;
  s.largest_free = by_size_.empty() ? 0 : by_size_.rbegin()->first.first;
  s.slab_growths = growths_;
  s.trims = trims_;
  return s;
}

}  // namespace uma
