#pragma once

// The vocabulary of the serving node's arbiter (docs/distributed.md "One GPU, many processes"):
// what a process asks for when it joins, what the operator allows each tenant, what the arbiter
// tells a process, and the report of who holds what. Plain data, no CAF, no gRPC: the arbiter's
// book, its gRPC service, the member's side and `uma budgets` all speak it.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace uma {

/// What a process asks of one device when it joins the arbiter (or later, `wanted` and `idle`).
/// `min_bytes`, `priority` and `weight` are capped by the operator's policy for the tenant
/// (`arbiter_policy`): asking more is refused, never granted.
struct arbiter_claim {
  int device = 0;
  /// Guaranteed: granted whatever others want, as long as the process is a member.
  std::uint64_t min_bytes = 0;
  /// What the process would use if it could (at least `min_bytes`).
  std::uint64_t wanted_bytes = 0;
  /// Higher first: a higher priority's wants are met before a lower one gets more than its min.
  std::uint32_t priority = 0;
  /// Within one priority, what is left is shared in proportion to the weights (1 to 1000).
  std::uint32_t weight = 1;
  /// An idle process lends what it holds above its minimum; it is reclaimed when it is busy again.
  bool idle = false;
};

/// What the operator allows a tenant on a device: the most a member of it may ask for.
/// A tenant without a policy gets the default: no minimum, priority 0, weight 1.
struct arbiter_policy {
  std::uint64_t min_bytes = 0;
  std::uint32_t priority = 0;
  std::uint32_t weight = 1;
};

/// What the arbiter tells a member about one device: the budget it may keep resident there from
/// now on. A budget lower than the last one must be evicted down to within `deadline`, then
/// acknowledged (`evicted`) with what is still resident; the bytes go to others only then.
struct arbiter_grant {
  std::uint64_t member = 0;
  int device = 0;
  std::uint64_t budget_bytes = 0;
  /// Numbers the member's grants; an acknowledgement names the one it answers.
  std::uint64_t sequence = 0;
  /// Lower than the grant before: evict down to it, then acknowledge.
  bool shrink = false;
  /// The member lost every grant (it did not evict in time, or the operator removed it): its
  /// further requests are refused.
  bool revoked = false;
  std::chrono::milliseconds deadline{0};
  /// Why (a decision of the ledger, e.g. "member 3 (uid 1000/infer) joined with priority 10").
  std::string why;
};

/// One decision of the arbiter, as its ledger keeps it.
struct arbiter_decision {
  std::chrono::milliseconds at{0};  // since the arbiter started
  std::uint64_t member = 0;
  std::string tenant;
  int device = 0;
  std::uint64_t from_bytes = 0;
  std::uint64_t to_bytes = 0;
  std::string why;
};

/// One member's state on one device.
struct arbiter_member_row {
  std::uint64_t member = 0;
  std::string tenant;  // "<identity>/<name>", e.g. "uid 1000/infer"
  arbiter_claim claim;
  /// What the member was told it may keep resident.
  std::uint64_t granted_bytes = 0;
  /// What the arbiter counts against the device's total: the grant, or more while a shrink is
  /// not acknowledged yet.
  std::uint64_t held_bytes = 0;
  /// What the member last said it holds resident.
  std::uint64_t resident_bytes = 0;
  /// "active", "idle" (its claim is idle), "shrinking" (a shrink is not acknowledged yet),
  /// "revoked".
  std::string state;
  std::uint64_t grown_bytes = 0;   // every grant's increase, summed
  std::uint64_t shrunk_bytes = 0;  // every acknowledged decrease, summed
  std::uint64_t shrinks = 0;
  /// The longest time a shrink took from the grant to its acknowledgement.
  std::chrono::milliseconds slowest_shrink{0};
};

/// One device the arbiter divides.
struct arbiter_device_row {
  int device = 0;
  std::uint64_t total_bytes = 0;
  std::uint64_t held_bytes = 0;  // every member's held bytes together (never above the total)
  std::vector<arbiter_member_row> members;
};

/// The arbiter's state: the devices with their members, and the latest decisions.
struct arbiter_report {
  std::vector<arbiter_device_row> devices;
  std::vector<arbiter_decision> decisions;  // oldest first, at most the ledger's length
  std::uint64_t members = 0;
  std::uint64_t revocations = 0;
};

}  // namespace uma
