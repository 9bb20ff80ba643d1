#pragma once

// How a plan fits a device (memory/residency_account.cpp): the budgets it must fit (its tenants',
// the device's) and the account's choice of victims, one budget at a time, least recently used
// first. A plan that needs bytes a budget cannot give is refused, or, under
// budget_overflow::map, has the regions that do not fit mapped instead of placed; a budget
// lowered below what is resident gets back what the regions no plan holds can give. CAF-free and
// backend-free: it decides nothing about moves, the account makes them.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <uma/memory/device_residency.hpp>
#include <uma/memory/tenant_budgets.hpp>
#include <uma/memory/vocabulary.hpp>

namespace uma::detail {

/// A region resident on the device, as the choice of victims sees it.
struct resident_region {
  std::uint64_t id = 0;
  std::size_t bytes = 0;
  std::uint64_t last_use = 0;
  bool held = false;        ///< a plan holds it: it stays, and counts against its budgets
  bool in_plan = false;     ///< named by the plan being decided: it stays, counted by the plan
  std::string_view tenant;  ///< the account's own string: a room lives only as long as a call
};

/// One budget's side of a change on the device: its limit, the bytes resident under it now,
/// what a plan adds there and keeps there, how a refusal names it (" on device 0, whose budget
/// is") and whose regions it counts.
struct budget_scope {
  std::size_t budget = 0;
  std::size_t resident = 0;
  std::size_t needed = 0;
  std::size_t staying = 0;
  std::string scope;
  std::optional<std::string_view> tenant;  ///< that tenant's regions; none: every region

  /// Whether a region of `owner` counts against this budget.
  [[nodiscard]] bool counts(std::string_view owner) const noexcept {
    return !tenant || owner == *tenant;
  }
};

/// One region a plan names, as its fit sees it (the account's decision, in the plan's order).
struct plan_part {
  std::uint64_t id = 0;
  std::size_t bytes = 0;
  std::string_view tenant;  ///< the plan's own string ("" for none)
  bool places = false;      ///< its policy puts it on the device (remote_map does not)
  bool resident = false;    ///< resident on the plan's device already: it stays

  [[nodiscard]] bool wanted() const noexcept { return places && !resident; }
};

/// The budgets `parts` must fit on device `device` (`d`: its account; `tenants`: theirs), each a
/// scope of its own: those of the plan's tenants that have one there, then the device's, if it
/// has one (last: it counts what the tenants' budgets evict already). None: nothing to fit.
[[nodiscard]] std::vector<budget_scope> plan_budgets(std::span<const plan_part> parts,
                                                     const tenant_budgets& tenants,
                                                     const device_residency& d, int device);

/// What a plan's fit decided.
struct plan_fit {
  std::vector<std::uint64_t> victims;  ///< to evict first, least recently used first
  std::vector<std::uint64_t> mapped;   ///< of the plan's own, mapped instead of placed
};

/// The regions resident on one device, least recently used first. Built for one call of the
/// account and dropped after it (it views the account's tenant names).
class residency_room {
 public:
  /// `on_device`: every region resident on the device, in any order.
  explicit residency_room(std::vector<resident_region> on_device);

  /// For a plan of `parts` (in its order) under `budgets` (plan_budgets'): under
  /// budget_overflow::refuse, make_room for each budget (quota_exceeded when one cannot hold
  /// it). Under budget_overflow::map nothing is refused: the parts the plan would move onto the
  /// device are taken in its order, each placed when every budget counting it can still give its
  /// bytes (its budget less the bytes that cannot go, less the parts placed before it), else
  /// mapped (a later, smaller part may still fit); then evict_down for what is placed. Parts
  /// resident already stay, even when the held bytes pass a budget.
  [[nodiscard]] plan_fit fit(std::span<const plan_part> parts, std::vector<budget_scope> budgets,
                             budget_overflow overflow) const;
  /// For a plan: refuses it (quota_exceeded) when the bytes in scope that cannot go (held by a
  /// plan, or staying in this one) leave `b.budget` no room for `b.needed`; else evict_down.
  /// Nothing is appended to `out` when it refuses.
  void make_room(const budget_scope& b, std::vector<std::uint64_t>& out) const;
  /// Appends to `out` the least recently used regions in scope that may go (held by no plan, not
  /// in the plan, not in `out` already: chosen for another budget) until `b.resident` (less what
  /// `out` holds of the scope's) plus `b.needed` fits `b.budget`, or none is left. Never refuses:
  /// a lowered budget's (`b.needed` 0) held regions stay where they are.
  void evict_down(const budget_scope& b, std::vector<std::uint64_t>& out) const;

 private:
  /// The bytes in `b`'s scope that cannot go: held by a plan, or staying in this one.
  [[nodiscard]] std::size_t kept(const budget_scope& b) const noexcept;
  /// budget_overflow::map's choice: the ids of the `parts` that do not fit `budgets`.
  [[nodiscard]] std::vector<std::uint64_t> overflowing(std::span<const plan_part> parts,
                                                       std::span<const budget_scope> budgets) const;

  std::vector<resident_region> lru_;  // least recently used first (ties: by id)
};

}  // namespace uma::detail
