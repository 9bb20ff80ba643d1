#include <uma/memory/tracking_resource.hpp>

#include <algorithm>
#include <utility>

namespace uma {

void tracking_resource::record(const allocation& a, const std::string& label) {
  try {
    std::lock_guard lock(mutex_);
    live_->insert_or_assign(a.data,
                            entry{a.bytes, a.charged, std::pmr::string(label, arena_.get())});
  } catch (...) {
    upstream().deallocate(a);  // out of host memory: the caller gets nothing, nothing leaks
    throw;
  }
}

allocation tracking_resource::do_allocate(const allocation_request& r) {
  auto a = upstream().allocate(r);
  record(a, r.label);
  return a;
}

void tracking_resource::do_deallocate(const allocation& a) noexcept {
  {
    std::lock_guard lock(mutex_);
    live_->erase(a.data);
  }
  upstream().deallocate(a);
}

tracking_resource::table* tracking_resource::make_table(std::pmr::memory_resource& arena) {
  return new (arena.allocate(sizeof(table), alignof(table))) table(&arena);
}

void tracking_resource::keep_only(const std::vector<const void*>& kept) noexcept {
  std::lock_guard lock(mutex_);
  try {
    auto arena = std::make_unique<std::pmr::unsynchronized_pool_resource>();
    auto* rest = make_table(*arena);
    for (const auto* data : kept)
      if (auto it = live_->find(data); it != live_->end())
        rest->emplace(data, entry{it->second.bytes, it->second.charged,
                                  std::pmr::string(it->second.label, arena.get())});
    retired_ = std::exchange(arena_, std::move(arena));  // the old table, unwalked, goes with it
    live_ = rest;
  } catch (...) {
    // out of host memory: everything stays tracked (the kept entries with the rest); what the
    // failed attempt took from its own pool goes with that pool
  }
}

std::vector<tracked_allocation> tracking_resource::outstanding() const {
  std::vector<tracked_allocation> out;
  {
    std::lock_guard lock(mutex_);
    out.reserve(live_->size());
    for (const auto& [data, e] : *live_)
      out.push_back({data, e.bytes, e.charged, std::string(e.label)});
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return std::less<const void*>{}(a.data, b.data); });
  return out;
}

std::string tracking_resource::label_of(const void* data) const {
  std::lock_guard lock(mutex_);
  auto it = live_->find(data);
  return it == live_->end() ? std::string{} : std::string(it->second.label);
}

std::size_t tracking_resource::size() const {
  std::lock_guard lock(mutex_);
  return live_->size();
}

}  // namespace uma
