#include <uma/memory/limit_resource.hpp>

#include <algorithm>

#include <uma/sys/detail/format.hpp>
#include <uma/sys/error.hpp>

namespace uma {

void limit_resource::set_limit(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  const auto held = held_.load(std::memory_order_relaxed);
  if (bytes < held)
    raise(errc::invalid_argument, "quota: " + detail::bytes(bytes) +
                                      " is below the bytes held from the backend (" +
                                      detail::bytes(held) + ")");
  limit_.store(bytes, std::memory_order_relaxed);
}

void limit_resource::reserve(std::size_t charged) {
  std::lock_guard lock(mutex_);
  const auto held = held_.load(std::memory_order_relaxed);
  const auto limit = limit_.load(std::memory_order_relaxed);
  // Compared without a sum, so that a huge request cannot wrap around.
  if (charged > limit || held > limit - charged)
    raise(errc::quota_exceeded, "allocate: " + detail::bytes(charged) + " with " +
                                    detail::bytes(held) + " held would go over the quota of " +
                                    detail::bytes(limit));
  held_.store(held + charged, std::memory_order_relaxed);
}

void limit_resource::release(std::size_t charged) noexcept {
  std::lock_guard lock(mutex_);
  held_.store(held_.load(std::memory_order_relaxed) - charged, std::memory_order_relaxed);
}

allocation limit_resource::do_allocate(const allocation_request& r) {
  const auto charged = upstream().charge_for(r.bytes, r.alignment);
  reserve(charged);
  try {
    return upstream().allocate(r);
  } catch (...) {
    release(charged);
    throw;
  }
}

void limit_resource::do_deallocate(const allocation& a) noexcept {
  upstream().deallocate(a);
  release(a.charged);
}

}  // namespace uma
