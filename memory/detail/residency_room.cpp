#include <uma/memory/detail/residency_room.hpp>

#include <algorithm>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>

#include <uma/sys/error.hpp>

namespace uma::detail {

residency_room::residency_room(std::vector<resident_region> on_device)
    : lru_(std::move(on_device)) {
  std::sort(lru_.begin(), lru_.end(), [](const resident_region& a, const resident_region& b) {
    return std::tie(a.last_use, a.id) < std::tie(b.last_use, b.id);
  });
}

void residency_room::make_room(const budget_scope& b, std::vector<std::uint64_t>& out) const {
  std::size_t kept = b.staying;  // resident bytes in scope that cannot go: held, or in this plan
  for (const auto& r : lru_)
    if (r.held && !r.in_plan && in_scope(r, b))
      kept += r.bytes;
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
    if (chosen.contains(r.id) && in_scope(r, b))
      resident -= r.bytes;  // leaving already
  for (const auto& r : lru_) {
    if (resident + b.needed <= b.budget)
      break;
    if (r.held || r.in_plan || chosen.contains(r.id) || !in_scope(r, b))
      continue;
    out.push_back(r.id);
    resident -= r.bytes;
  }
}

}  // namespace uma::detail
