#include <uma/actors/remote/detail/tenant_totals.hpp>

namespace uma::detail {

std::shared_ptr<lease_totals> tenant_totals::of(const std::string& tenant) {
  auto& totals = tenants_[tenant];
  if (totals == nullptr)
    totals = std::make_shared<lease_totals>(all_);
  return totals;
}

void tenant_totals::forget_unused(const std::string& tenant) noexcept {
  auto it = tenants_.find(tenant);
  if (it != tenants_.end() && it->second.use_count() == 1)
    tenants_.erase(it);  // its totals are all zero: every book counting in them is gone
}

}  // namespace uma::detail
