#pragma once

// Per-tenant device budgets of the residency account (issue 15, docs/residency.md "Tenants"): a
// tenant is a name plans carry — a remote session's, a service's client — and each tenant's
// bytes on a device can be held under a budget of their own, inside the device's. CAF-free and
// backend-free; the account owns it (one owner, not thread-safe).

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <uma/memory/device_residency.hpp>

namespace uma {

/// The longest tenant name accepted (a label for metrics, not a document).
inline constexpr std::size_t max_tenant_name = 128;

class tenant_budgets {
 public:
  /// `device_memory[d]`: the bytes of device d (a budget may not pass them).
  explicit tenant_budgets(std::vector<std::size_t> device_memory);

  /// Throws invalid_argument unless `tenant` is a usable name: 1 to max_tenant_name printable
  /// characters.
  static void check_name(std::string_view tenant, const char* what);
  /// Sets `tenant`'s budget on `device` (checked by the caller): 0 removes it, else at most the
  /// device's memory. Throws invalid_argument (nothing changed).
  void set(std::string_view tenant, int device, std::size_t bytes);
  /// `tenant`'s budget, resident and peak bytes on `device` (held: 0, the account fills it in);
  /// all 0 for a tenant never seen.
  [[nodiscard]] device_residency get(std::string_view tenant, int device) const;
  /// Makes sure `tenant` is tracked (may allocate): called before the account's changes begin,
  /// so that placed() and left() cannot throw.
  void track(const std::string& tenant);
  /// `bytes` of `tenant` arrived on / left `device` (no-ops for the empty tenant).
  void placed(const std::string& tenant, int device, std::size_t bytes) noexcept;
  void left(const std::string& tenant, int device, std::size_t bytes) noexcept;
  /// Every tenant's resident bytes go back to zero; budgets and peaks stay.
  void clear() noexcept;
  /// Tenants with a budget or bytes placed so far, sorted.
  [[nodiscard]] std::vector<std::string> names() const;

 private:
  std::vector<std::size_t> memory_;
  std::map<std::string, std::vector<device_residency>, std::less<>> tenants_;
};

}  // namespace uma
