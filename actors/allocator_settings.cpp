#include <uma/actors/allocator_settings.hpp>

#include <algorithm>

#include <uma/memory/residency_account.hpp>

namespace uma {

allocator_settings allocator_settings::of(const allocator_config& config) {
  return {config.memory.quota_bytes, config.residency};
}

void allocator_settings::apply_to(allocator_config& config) const {
  config.memory.quota_bytes = quota_bytes;
  config.residency = residency;
}

void allocator_settings::set_quota(std::uint64_t bytes) noexcept {
  if (bytes != 0)
    quota_bytes = bytes;
}

void allocator_settings::set_budget(int device, std::uint64_t bytes,
                                    const std::vector<std::size_t>& device_memory) {
  if (bytes == 0)
    return;
  auto next = *this;
  std::erase_if(next.residency.device_budgets,
                [device](const auto& b) { return b.first == device; });
  next.residency.device_budgets.emplace_back(device, bytes);
  next.check(device_memory);  // throws before anything changed
  *this = std::move(next);
}

void allocator_settings::set_tenant_budget(const std::string& tenant, int device,
                                           std::uint64_t bytes,
                                           const std::vector<std::size_t>& device_memory) {
  auto next = *this;
  std::erase_if(next.residency.tenant_budgets, [&](const auto& b) {
    return std::get<0>(b) == tenant && std::get<1>(b) == device;
  });
  // The new value is checked even when it removes the budget: a bad tenant or device is refused
  // as the incarnation refuses it.
  residency_account probe(device_memory);
  probe.set_tenant_budget(tenant, device, bytes);
  if (bytes != 0)
    next.residency.tenant_budgets.emplace_back(tenant, device, bytes);
  next.check(device_memory);
  *this = std::move(next);
}

void allocator_settings::check(const std::vector<std::size_t>& device_memory) const {
  // The same account the incarnation keeps, so that both refuse exactly the same values.
  residency_account probe(device_memory);
  for (const auto& [device, bytes] : residency.device_budgets)
    probe.set_budget(device, bytes);
  for (const auto& [tenant, device, bytes] : residency.tenant_budgets)
    probe.set_tenant_budget(tenant, device, bytes);
  probe.set_overflow(residency.overflow);
}

}  // namespace uma
