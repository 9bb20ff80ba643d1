#include <uma/memory/tracking_resource.hpp>

#include <algorithm>

namespace uma {

void tracking_resource::record(const allocation& a, const std::string& label) {
  try {
    std::lock_guard lock(mutex_);
    live_.insert_or_assign(a.data, tracked_allocation{a.data, a.bytes, a.charged, label});
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

std::optional<allocation> tracking_resource::do_try_allocate(const allocation_request& r) {
  auto a = upstream().try_allocate(r);
  if (a)
    record(*a, r.label);
  return a;
}

void tracking_resource::do_deallocate(const allocation& a) noexcept {
  {
    std::lock_guard lock(mutex_);
    live_.erase(a.data);
  }
  upstream().deallocate(a);
}

void tracking_resource::keep_only(const std::vector<const void*>& kept) noexcept {
  std::unordered_map<const void*, tracked_allocation> rest;
  std::lock_guard lock(mutex_);
  try {
    for (const auto* data : kept)
      if (auto it = live_.find(data); it != live_.end())
        rest.insert(live_.extract(it));
  } catch (...) {
    // out of host memory: the kept entries that did not move lose their labels, nothing else
  }
  live_.swap(rest);
}

std::vector<tracked_allocation> tracking_resource::outstanding() const {
  std::vector<tracked_allocation> out;
  {
    std::lock_guard lock(mutex_);
    out.reserve(live_.size());
    for (const auto& [data, t] : live_)
      out.push_back(t);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return std::less<const void*>{}(a.data, b.data); });
  return out;
}

std::string tracking_resource::label_of(const void* data) const {
  std::lock_guard lock(mutex_);
  auto it = live_.find(data);
  return it == live_.end() ? std::string{} : it->second.label;
}

std::size_t tracking_resource::size() const {
  std::lock_guard lock(mutex_);
  return live_.size();
}

}  // namespace uma
