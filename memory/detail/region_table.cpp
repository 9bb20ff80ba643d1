#include <uma/memory/detail/region_table.hpp>

#include <algorithm>

namespace uma::detail {

void region_table::insert(region* r, attach_flag attach) {
  entries_.emplace(r->id, entry{r, attach, std::chrono::steady_clock::now()});
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
    out.push_back(region_info{
        id, generation, e.region->bytes, labels.label_of(e.region->data), e.attach,
        e.region->refs.load(std::memory_order_relaxed),
        e.region->pins.load(std::memory_order_relaxed),
        std::chrono::duration_cast<std::chrono::milliseconds>(now - e.created).count()});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

}  // namespace uma::detail
