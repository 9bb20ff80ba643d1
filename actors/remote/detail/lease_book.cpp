#include <uma/actors/remote/detail/lease_book.hpp>

#include <utility>

namespace uma::detail {

region_handle lease_book::add(byte_ref ref, std::uint64_t charge, lease_origin origin) {
  const region_handle h{ref.id(), ref.generation()};
  static_cast<void>(release(h));  // a lease of the same handle is replaced
  const std::uint64_t bytes = ref.bytes();
  auto it = leases_
                .emplace(h, lease{std::move(ref), bytes, charge, std::move(origin),
                                  std::chrono::steady_clock::now()})
                .first;
  try {
    totals_.add(it->second.ref, bytes, charge);
  } catch (...) {
    leases_.erase(it);  // not counted, so not leased
    throw;
  }
  return h;
}

std::optional<std::uint64_t> lease_book::release(const region_handle& h) {
  auto it = leases_.find(h);
  if (it == leases_.end())
    return std::nullopt;
  const auto& l = it->second;
  // A lease of a stopped incarnation gives nothing back: its memory went with it.
  const std::uint64_t bytes = l.ref.valid() ? l.bytes : 0;
  totals_.remove(l.ref, l.bytes, l.charge);
  leases_.erase(it);  // drops the ref: the allocator frees what nobody else holds
  return bytes;
}

leases_released lease_book::release_all() noexcept {
  const leases_released out{leases_.size(), totals_.held_bytes()};
  totals_.clear();
  visited_ += leases_.size();
  leases_.clear();
  return out;
}

std::optional<lease_miss> lease_book::resolve(const std::vector<region_handle>& handles,
                                              std::vector<byte_ref>& refs) const {
  refs.reserve(refs.size() + handles.size());
  for (const auto& h : handles) {
    auto it = leases_.find(h);
    if (it != leases_.end() && it->second.ref.valid()) {
      refs.push_back(it->second.ref);
      continue;
    }
    lease_miss miss{h, it != leases_.end(), std::nullopt};
    for (auto same = leases_.lower_bound({h.id, 0});
         same != leases_.end() && same->first.id == h.id; ++same, ++visited_)
      if (same->first != h)
        miss.same_id = same->first;
    return miss;
  }
  return std::nullopt;
}

void lease_book::for_each_live(
    const std::function<void(const region_handle&, const byte_ref&)>& f) const {
  for (const auto& [h, l] : leases_) {
    ++visited_;
    if (l.ref.valid())
      f(h, l.ref);
  }
}

void lease_book::for_each_lease(
    const std::function<void(const region_handle&, const lease&)>& f) const {
  for (const auto& [h, l] : leases_) {
    ++visited_;
    f(h, l);
  }
}

}  // namespace uma::detail
