#include <uma/actors/detail/lease_book.hpp>

#include <utility>

namespace uma::detail {

region_handle lease_book::add(byte_ref ref, std::uint64_t charge) {
  const region_handle h{ref.id(), ref.generation()};
  leases_.insert_or_assign(h, lease{std::move(ref), charge});
  return h;
}

std::optional<std::uint64_t> lease_book::release(const region_handle& h) {
  auto it = leases_.find(h);
  if (it == leases_.end())
    return std::nullopt;
  // A lease of a stopped incarnation gives nothing back: its memory went with it.
  const std::uint64_t bytes = it->second.ref.valid() ? it->second.ref.bytes() : 0;
  leases_.erase(it);  // drops the ref: the allocator frees what nobody else holds
  return bytes;
}

leases_released lease_book::release_all() noexcept {
  const leases_released out{leases_.size(), held_bytes()};
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
         same != leases_.end() && same->first.id == h.id; ++same)
      if (same->first != h)
        miss.same_id = same->first;
    return miss;
  }
  return std::nullopt;
}

void lease_book::for_each_live(
    const std::function<void(const region_handle&, const byte_ref&)>& f) const {
  for (const auto& [h, l] : leases_)
    if (l.ref.valid())
      f(h, l.ref);
}

std::uint64_t lease_book::held_bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto& [h, l] : leases_)
    if (l.ref.valid())
      n += l.ref.bytes();
  return n;
}

std::uint64_t lease_book::charged() const noexcept {
  // No overflow: every charge was admitted against a 64-bit quota with checked sums.
  std::uint64_t n = pending_;
  for (const auto& [h, l] : leases_)
    if (l.ref.valid())
      n += l.charge;
  return n;
}

}  // namespace uma::detail
