#include <uma/actors/remote/detail/lease_totals.hpp>

namespace uma::detail {

namespace {

/// The control block of `ref`'s incarnation (null for an empty ref: never alive).
std::shared_ptr<const control_block> control_of(const byte_ref& ref) noexcept {
  const auto* r = record_of(ref);
  return r != nullptr ? r->control : nullptr;
}

[[nodiscard]] bool holds_memory(const std::shared_ptr<const control_block>& c) noexcept {
  return c != nullptr && c->alive();
}

}  // namespace

void lease_totals::add(const byte_ref& ref, std::uint64_t bytes, std::uint64_t charge) {
  auto control = control_of(ref);
  const auto* key = control.get();
  if (parent_)
    parent_->add(ref, bytes, charge);  // throws: nothing changed
  try {
    auto& inc = incarnations_[key];
    if (inc.control == nullptr)
      inc.control = std::move(control);
    ++inc.leases;
    inc.bytes += bytes;
    inc.charge += charge;
    ++leases_;
  } catch (...) {
    if (parent_)
      parent_->take(key, 1, bytes, charge);
    throw;
  }
}

void lease_totals::remove(const byte_ref& ref, std::uint64_t bytes, std::uint64_t charge) noexcept {
  const auto* r = record_of(ref);
  take(r != nullptr ? r->control.get() : nullptr, 1, bytes, charge);
}

void lease_totals::clear() noexcept {
  while (!incarnations_.empty()) {
    const auto& [key, inc] = *incarnations_.begin();
    take(key, inc.leases, inc.bytes, inc.charge);  // erases the entry
  }
}

void lease_totals::take(const control_block* key, std::uint64_t leases, std::uint64_t bytes,
                        std::uint64_t charge) noexcept {
  auto it = incarnations_.find(key);
  if (it == incarnations_.end())
    return;  // never counted: nothing to take back
  auto& inc = it->second;
  inc.leases -= leases;
  inc.bytes -= bytes;
  inc.charge -= charge;
  if (inc.leases == 0)
    incarnations_.erase(it);  // lets go of the control block
  leases_ -= leases;
  if (parent_)
    parent_->take(key, leases, bytes, charge);
}

void lease_totals::reserve(std::uint64_t charge) noexcept {
  pending_ += charge;
  if (parent_)
    parent_->reserve(charge);
}

void lease_totals::settle(std::uint64_t charge) noexcept {
  pending_ -= charge;
  if (parent_)
    parent_->settle(charge);
}

std::uint64_t lease_totals::live_leases() const noexcept {
  std::uint64_t n = 0;
  for (const auto& [key, inc] : incarnations_)
    n += holds_memory(inc.control) ? inc.leases : 0;
  return n;
}

std::uint64_t lease_totals::held_bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto& [key, inc] : incarnations_)
    n += holds_memory(inc.control) ? inc.bytes : 0;
  return n;
}

std::uint64_t lease_totals::charged() const noexcept {
  // No overflow: every charge was admitted against a 64-bit quota with checked sums.
  std::uint64_t n = pending_;
  for (const auto& [key, inc] : incarnations_)
    n += holds_memory(inc.control) ? inc.charge : 0;
  return n;
}

}  // namespace uma::detail
