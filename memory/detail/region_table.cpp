#include <uma/memory/detail/region_table.hpp>

#include <algorithm>

namespace uma::detail {

void region_table::insert(region* r, attach_flag attach) {
  // A region whose release is still queued may have started at the same address (its memory
  // went back to the backend, which handed it out again): the newer region owns the address
  // from now on, and erasing the older one leaves it alone (erase below).
  const auto address = reinterpret_cast<std::uintptr_t>(r->data);
  entries_.emplace(r->id, entry{r, attach, std::chrono::steady_clock::now()});
  try {
    by_address_.insert_or_assign(address, r->id);
  } catch (...) {
    entries_.erase(r->id);
    throw;
  }
}

void region_table::erase(std::uint64_t id) noexcept {
  const auto it = entries_.find(id);
  if (it == entries_.end())
    return;
  const auto at = by_address_.find(reinterpret_cast<std::uintptr_t>(it->second.region->data));
  if (at != by_address_.end() && at->second == id)
    by_address_.erase(at);
  entries_.erase(it);
}

const region_table::entry* region_table::containing(std::uintptr_t address, std::size_t bytes,
                                                    std::uint64_t& id) const noexcept {
  auto it = by_address_.upper_bound(address);
  if (it == by_address_.begin())
    return nullptr;
  --it;
  const auto* e = find(it->second);
  if (e == nullptr)
    return nullptr;
  const auto offset = address - it->first;
  if (offset >= e->region->bytes || bytes > e->region->bytes - offset)
    return nullptr;
  id = it->second;
  return e;
}

region_table::entry* region_table::find(std::uint64_t id) noexcept {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<region_info> region_table::report(std::uint64_t generation,
                                              const tracking_resource& labels) const {
  const auto now = std::chrono::steady_clock::now();
  std::vector<region_info> out;
  out.reserve(entries_.size());
  for (const auto& [id, e] : entries_)
    out.push_back(
        region_info{id, generation, e.region->bytes, labels.label_of(e.region->data), e.attach,
                    e.region->refs.load(std::memory_order_relaxed),
                    e.region->pins.load(std::memory_order_relaxed),
                    std::chrono::duration_cast<std::chrono::milliseconds>(now - e.created).count(),
                    e.region->kind});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

}  // namespace uma::detail
