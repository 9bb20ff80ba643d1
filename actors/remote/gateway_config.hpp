#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include <uma/messages/remote_types.hpp>

namespace uma {

/// How a remote gateway runs: who may do what, and how much one tenant (one peer node) may take.
/// Zero limits mean "none" where noted.
struct gateway_config {
  /// Called for each session event ("session 2 opened by node ...", "session 2 ended: its peer
  /// went down (...); released 3 lease(s), 786432 bytes") and each refused remote exit or link.
  /// Empty: silent. May be called from CAF's threads.
  std::function<void(const std::string&)> log{};
  /// The operator's capability: quota changes and everyone's region table. Empty (the
  /// default): no request is an operator's.
  operator_key operator_secret{};
  /// No quota request may set more than this. 0: the quota in force when the gateway starts.
  std::uint64_t quota_ceiling = 0;
  /// Bytes (regions plus labels, allocations in flight included) one tenant may hold; 0: only
  /// the allocator's quota bounds it.
  std::uint64_t tenant_quota_bytes = 0;
  /// Bytes of one tenant's regions (one peer node's) that the serving node's residency account
  /// keeps on a device its plans name (docs/residency.md "Tenants"): the gateway sets this tenant
  /// budget before the tenant's first plan on a device. 0: only the device's own budget.
  std::uint64_t tenant_device_budget_bytes = 0;
  /// Longest label accepted, in bytes.
  std::size_t max_label_bytes = 256;
  /// Sessions one tenant may have open.
  std::size_t max_sessions_per_tenant = 64;
  /// Leases one session may hold (allocations in flight included).
  std::size_t max_leases_per_session = 4096;
  /// Requests of one session the gateway forwards before answering earlier ones.
  std::uint32_t max_in_flight_per_session = 64;
  /// Rows of the region table in one `regions` reply (a larger page asked for is cut to this).
  std::uint32_t max_region_page = 256;
  /// A session with no request for this long is ended and its leases released; 0: never.
  std::chrono::milliseconds idle_timeout{0};
};

}  // namespace uma
