#include <uma/memory/statistics_resource.hpp>

namespace uma {

namespace {
constexpr auto relaxed = std::memory_order_relaxed;
}  // namespace

void statistics_resource::count(const allocation& a) noexcept {
  const auto now = current_bytes_.fetch_add(a.charged, relaxed) + a.charged;
  auto peak = peak_bytes_.load(relaxed);
  while (now > peak && !peak_bytes_.compare_exchange_weak(peak, now, relaxed))
    ;
  current_count_.fetch_add(1, relaxed);
  total_bytes_.fetch_add(a.charged, relaxed);
  allocations_.fetch_add(1, relaxed);
}

allocation statistics_resource::do_allocate(const allocation_request& r) {
  try {
    auto a = upstream().allocate(r);
    count(a);
    return a;
  } catch (...) {
    failures_.fetch_add(1, relaxed);
    throw;
  }
}

void statistics_resource::do_deallocate(const allocation& a) noexcept {
  upstream().deallocate(a);
  current_bytes_.fetch_sub(a.charged, relaxed);
  current_count_.fetch_sub(1, relaxed);
  deallocations_.fetch_add(1, relaxed);
}

resource_statistics statistics_resource::statistics() const noexcept {
  return {current_bytes_.load(relaxed), current_count_.load(relaxed), peak_bytes_.load(relaxed),
          total_bytes_.load(relaxed),   allocations_.load(relaxed),   deallocations_.load(relaxed),
          failures_.load(relaxed)};
}

}  // namespace uma
