#pragma once

// The residency account's vocabulary (docs/residency.md): policies, access modes, the moves it
// decides, its ledger and what a plan names. CAF-free and backend-free.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <uma/memory/vocabulary.hpp>

namespace uma {

/// One move the account decided.
enum class residency_move_kind : std::uint8_t {
  to_device,   ///< prefetch onto the device: `bytes` cross host -> device
  to_host,     ///< prefetch back to the host: `bytes` cross device -> host
  drop_copy,   ///< a read-mostly replica dropped: nothing moves
  discard,     ///< contents dropped (dead data, a scratch region's eviction): nothing moves
  map_remote,  ///< preferred location host + accessed-by the device: nothing moves
};

[[nodiscard]] std::string_view to_string(residency_move_kind k) noexcept;

struct residency_move {
  residency_move_kind kind = residency_move_kind::to_device;
  /// The account's id of what moves: a region, or (under the allocator) an extent of one
  /// (memory/planned_extents.hpp), which the owner maps to its bytes.
  std::uint64_t region = 0;
  int device = 0;
  std::size_t bytes = 0;                                ///< the region's bytes the move covers
  residency_policy policy = residency_policy::migrate;  ///< the policy it follows (never automatic)
  /// A placement of a region mapped remotely until now: the mapping goes first (its preferred
  /// location and accessed-by advice), then the region moves.
  bool unmap_first = false;
  /// The region's preferred location becomes the host first (a read-mostly placement or a
  /// remote mapping; it stays so, and a dropped copy collapses to the host's by it). False when
  /// it is the host already: advice costs milliseconds even when it changes nothing.
  bool prefer_host = false;
};

/// What one will_access or dead decided. Evictions come first in the account; a caller may run
/// them on another lane while the placements run, since no placement needs an evicted region.
struct residency_plan {
  std::vector<residency_move> evictions;
  std::vector<residency_move> placements;
  /// Of the plan's bytes, those its budgets could not hold, mapped remotely for the device
  /// instead (budget_overflow::map): a map_remote placement each, or none when it was mapped for
  /// the device already. 0 under budget_overflow::refuse.
  std::size_t overflow_bytes = 0;
};

/// What uma moved for a region (or, summed, for all of them).
struct residency_ledger {
  std::uint64_t to_device_bytes = 0;  ///< host -> device by uma's prefetches
  std::uint64_t to_host_bytes = 0;    ///< device -> host by uma's evictions
  std::uint64_t dropped_bytes = 0;    ///< read-mostly copies dropped (no transfer)
  std::uint64_t discarded_bytes = 0;  ///< dead or scratch contents dropped (no transfer)
  std::uint64_t placements = 0;
  std::uint64_t evictions = 0;
  std::uint64_t refetches = 0;  ///< placed again after an eviction with no use in between
  residency_ledger& operator+=(const residency_ledger& o) noexcept;
  friend bool operator==(const residency_ledger&, const residency_ledger&) = default;
};

/// What a caller that cycles through the same plans (an access_sequence) tells the `automatic`
/// policy: for a region read by a cycle larger than the device's budget, the account keeps the
/// part of the cycle that fits resident and maps the rest remotely, instead of evicting part of
/// the cycle for it every pass (docs/residency.md "Policies").
struct cycle_hint {
  std::uint64_t bytes = 0;  ///< the regions the cycle goes through (0: no cycle known)
  std::uint32_t plans = 0;  ///< plans per cycle: a region unused for longer is not the cycle's
};

/// A region a plan names: a whole region, or (under the allocator) one extent of pages of one.
struct planned_region {
  std::uint64_t id = 0;  ///< the account's id (an extent's id under the allocator)
  std::size_t bytes = 0;
  residency_policy policy = residency_policy::automatic;
  /// The ledger's per-label sums: kept from the region's first plan; a later plan that names
  /// another (not empty) relabels the region from then on (residency_account::will_access).
  std::string label{};
  /// The tenant whose bytes the region counts as (docs/residency.md "Tenants"), fixed by its
  /// first plan; "" for none. Later plans must name the same tenant.
  std::string tenant{};
  /// The cycle the caller runs this region in (an access_sequence's); none when unknown.
  cycle_hint cycle{};
};

}  // namespace uma
