#include <uma/memory/tenant_budgets.hpp>

#include <algorithm>
#include <utility>

#include <uma/sys/error.hpp>

namespace uma {

tenant_budgets::tenant_budgets(std::vector<std::size_t> device_memory)
    : memory_(std::move(device_memory)) {}

void tenant_budgets::check_name(std::string_view tenant, const char* what) {
  if (tenant.empty() || tenant.size() > max_tenant_name)
    raise(errc::invalid_argument,
          std::string(what) + ": a tenant name of " + std::to_string(tenant.size()) +
              " characters; it must be 1 to " + std::to_string(max_tenant_name));
  const bool printable = std::all_of(tenant.begin(), tenant.end(), [](char c) {
    return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
  });
  if (!printable)
    raise(errc::invalid_argument,
          std::string(what) + ": a tenant name with a control character in it");
}

void tenant_budgets::set(std::string_view tenant, int device, std::size_t bytes) {
  check_name(tenant, "tenant_budget");
  const auto d = static_cast<std::size_t>(device);
  if (bytes > memory_.at(d))
    raise(errc::invalid_argument, "tenant_budget: a budget of " + std::to_string(bytes) +
                                      " bytes for tenant '" + std::string(tenant) + "' on device " +
                                      std::to_string(device) +
                                      "; it must be at most the device's " +
                                      std::to_string(memory_[d]) + " bytes (0 removes it)");
  track(std::string(tenant));
  tenants_.find(tenant)->second[d].budget = bytes;
}

device_residency tenant_budgets::get(std::string_view tenant, int device) const {
  const auto d = static_cast<std::size_t>(device);
  const auto it = tenants_.find(tenant);
  if (it == tenants_.end())
    return {memory_.at(d), 0, 0, 0, 0};
  return it->second.at(d);
}

void tenant_budgets::track(const std::string& tenant) {
  if (tenant.empty() || tenants_.contains(tenant))
    return;
  std::vector<device_residency> devices;
  for (const auto bytes : memory_)
    devices.push_back({bytes, 0, 0, 0, 0});
  tenants_.emplace(tenant, std::move(devices));
}

void tenant_budgets::placed(const std::string& tenant, int device, std::size_t bytes) noexcept {
  const auto it = tenants_.find(tenant);
  if (it == tenants_.end())
    return;  // the empty tenant (track() was called for every other)
  auto& d = it->second[static_cast<std::size_t>(device)];
  d.resident += bytes;
  d.peak = std::max(d.peak, d.resident);
}

void tenant_budgets::left(const std::string& tenant, int device, std::size_t bytes) noexcept {
  const auto it = tenants_.find(tenant);
  if (it != tenants_.end())
    it->second[static_cast<std::size_t>(device)].resident -= bytes;
}

void tenant_budgets::clear() noexcept {
  for (auto& [name, devices] : tenants_)
    for (auto& d : devices)
      d.resident = 0;
}

std::vector<std::string> tenant_budgets::names() const {
  std::vector<std::string> out;
  for (const auto& [name, devices] : tenants_)
    out.push_back(name);
  return out;
}

}  // namespace uma
