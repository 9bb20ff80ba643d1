#pragma once

// The lease totals of each tenant with a session open, and of every tenant together
// (actors/remote/detail/lease_totals.hpp): what admission and stats read instead of summing the
// sessions' leases. Plain data; the gateway actor owns one and is its only user.

#include <map>
#include <memory>
#include <string>

#include <uma/actors/remote/detail/lease_totals.hpp>

namespace uma::detail {

/// Each tenant's lease totals, each counting in the gateway's. A session's lease book counts in
/// its tenant's (it holds them), so a tenant's totals live as long as one of its sessions does.
class tenant_totals {
 public:
  /// The totals of `tenant`, made (counting in every tenant's) when it has none yet.
  [[nodiscard]] std::shared_ptr<lease_totals> of(const std::string& tenant);
  /// Forgets `tenant`'s totals once no session's book holds them any more.
  void forget_unused(const std::string& tenant) noexcept;
  /// Every tenant's leases together.
  [[nodiscard]] const lease_totals& all() const noexcept { return *all_; }
  /// Tenants with totals (a session open, or about to be forgotten).
  [[nodiscard]] std::size_t tenants() const noexcept { return tenants_.size(); }

 private:
  std::shared_ptr<lease_totals> all_ = std::make_shared<lease_totals>();
  std::map<std::string, std::shared_ptr<lease_totals>> tenants_;
};

}  // namespace uma::detail
