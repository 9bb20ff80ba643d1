#pragma once

// Which regions leave a device to make room (memory/residency_account.cpp): the residency
// account's choice of victims, one budget at a time, least recently used first. A plan that
// needs bytes a budget cannot give is refused; a budget lowered below what is resident gets back
// what the regions no plan holds can give. CAF-free and backend-free: it decides nothing about
// moves, the account makes them.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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
};

/// The regions resident on one device, least recently used first. Built for one call of the
/// account and dropped after it (it views the account's tenant names).
class residency_room {
 public:
  /// `on_device`: every region resident on the device, in any order.
  explicit residency_room(std::vector<resident_region> on_device);

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
  [[nodiscard]] static bool in_scope(const resident_region& r, const budget_scope& b) noexcept {
    return !b.tenant || r.tenant == *b.tenant;
  }

  std::vector<resident_region> lru_;  // least recently used first (ties: by id)
};

}  // namespace uma::detail
