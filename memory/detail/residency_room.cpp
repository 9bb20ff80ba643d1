#include <uma/memory/detail/residency_room.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>

#include <uma/sys/error.hpp>

namespace uma::detail {

std::vector<budget_scope> plan_budgets(std::span<const plan_part> parts,
                                       const tenant_budgets& tenants, const device_residency& d,
                                       int device) {
  std::map<std::string_view, budget_scope> of_tenant;
  budget_scope all{d.budget, d.resident, 0, 0, {}, std::nullopt};
  for (const auto& p : parts) {
    if (!p.places)
      continue;
    (p.resident ? all.staying : all.needed) += p.bytes;
    if (!p.tenant.empty()) {
      auto& t = of_tenant[p.tenant];
      (p.resident ? t.staying : t.needed) += p.bytes;
    }
  }
  std::vector<budget_scope> out;
  for (auto& [tenant, b] : of_tenant) {
    const auto t = tenants.get(tenant, device);
    if (t.budget == 0)
      continue;
    b.budget = t.budget;
    b.resident = t.resident;
    b.scope = " of tenant '" + std::string(tenant) + "' on device " + std::to_string(device) +
              ", whose budget for it is";
    b.tenant = tenant;
    out.push_back(std::move(b));
  }
  if (d.budget != 0) {  // last: it counts what the tenants' budgets evict already
    all.scope = " on device " + std::to_string(device) + ", whose budget is";
    out.push_back(std::move(all));
  }
  return out;
}

residency_room::residency_room(std::vector<resident_region> on_device)
    : lru_(std::move(on_device)) {
  std::sort(lru_.begin(), lru_.end(), [](const resident_region& a, const resident_region& b) {
    return std::tie(a.last_use, a.id) < std::tie(b.last_use, b.id);
  });
}

plan_fit residency_room::fit(std::span<const plan_part> parts, std::vector<budget_scope> budgets,
                             budget_overflow overflow) const {
  plan_fit out;
  if (overflow == budget_overflow::refuse) {
    for (const auto& b : budgets)
      make_room(b, out.victims);
    return out;
  }
  out.mapped = overflowing(parts, budgets);
  const std::unordered_set<std::uint64_t> mapped(out.mapped.begin(), out.mapped.end());
  for (const auto& p : parts)
    if (mapped.contains(p.id))
      for (auto& b : budgets)
        if (b.counts(p.tenant))
          b.needed -= p.bytes;  // mapped: it needs no room
  for (const auto& b : budgets)
    evict_down(b, out.victims);  // what is left fits, unless what stays passes the budget
  return out;
}

std::size_t residency_room::kept(const budget_scope& b) const noexcept {
  std::size_t out = b.staying;
  for (const auto& r : lru_)
    if (r.held && !r.in_plan && b.counts(r.tenant))
      out += r.bytes;
  return out;
}

std::vector<std::uint64_t> residency_room::overflowing(
    std::span<const plan_part> parts, std::span<const budget_scope> budgets) const {
  std::vector<std::size_t> room;  // what each budget can still give
  for (const auto& b : budgets) {
    const auto k = kept(b);
    room.push_back(k < b.budget ? b.budget - k : 0);
  }
  std::vector<std::uint64_t> out;
  for (const auto& p : parts) {
    if (!p.wanted())
      continue;
    bool fits = true;
    for (std::size_t i = 0; i < budgets.size(); ++i)
      fits = fits && (!budgets[i].counts(p.tenant) || p.bytes <= room[i]);
    if (!fits) {
      out.push_back(p.id);
      continue;
    }
    for (std::size_t i = 0; i < budgets.size(); ++i)
      if (budgets[i].counts(p.tenant))
        room[i] -= p.bytes;
  }
  return out;
}

void residency_room::make_room(const budget_scope& b, std::vector<std::uint64_t>& out) const {
  const auto kept = this->kept(b);  // resident bytes in scope that cannot go: held, or in the plan
  if (b.needed > b.budget || kept > b.budget - b.needed)
    raise(errc::quota_exceeded, "will_access: the plan needs " + std::to_string(b.needed) +
                                    " more bytes" + b.scope + " " + std::to_string(b.budget) +
                                    " bytes with " + std::to_string(kept) +
                                    " held by plans or by this one");
  evict_down(b, out);
}

void residency_room::evict_down(const budget_scope& b, std::vector<std::uint64_t>& out) const {
  const std::unordered_set<std::uint64_t> chosen(out.begin(), out.end());  // by another budget
  std::size_t resident = b.resident;
  for (const auto& r : lru_)
    if (chosen.contains(r.id) && b.counts(r.tenant))
      resident -= r.bytes;  // leaving already
  for (const auto& r : lru_) {
    if (resident + b.needed <= b.budget)
      break;
    if (r.held || r.in_plan || chosen.contains(r.id) || !b.counts(r.tenant))
      continue;
    out.push_back(r.id);
    resident -= r.bytes;
  }
}

}  // namespace uma::detail
