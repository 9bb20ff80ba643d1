#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <uma/sys/error.hpp>

namespace uma {

/// Counters of one allocator incarnation. A plain value: the `stats` reply.
struct allocator_stats {
  std::string backend;  ///< "host" or "cuda"
  std::uint64_t generation = 0;
  std::uint64_t quota_bytes = 0;
  std::uint64_t allocations = 0;
  std::uint64_t releases = 0;
  std::uint64_t live_regions = 0;
  std::uint64_t live_bytes = 0;
  std::uint64_t peak_bytes = 0;
  std::uint64_t total_bytes_allocated = 0;
  std::uint64_t prefetches = 0;  ///< ranges prefetched (discard_prefetch counts here too)
  std::uint64_t prefetch_bytes = 0;
  std::uint64_t advises = 0;   ///< ranges advised
  std::uint64_t discards = 0;  ///< ranges discarded (discard_prefetch counts here too)
  std::uint64_t discard_bytes = 0;
  std::uint64_t inert_refusals = 0;    ///< requests refused because a ref was inert
  std::uint64_t pending_jobs = 0;      ///< backend calls queued off the actor's loop
  std::uint64_t advice_elided = 0;     ///< advice calls skipped because they changed nothing
  std::uint64_t ranges_coalesced = 0;  ///< ranges merged into a neighbour before the backend
  std::uint64_t reserved_bytes = 0;    ///< bytes held under the quota (slabs, direct regions)
  /// The block allocator's slabs held, and their bytes (counted in live_bytes too). Not leases
  /// (docs/design.md, "Glossary"): the names are the C ABI's, kept for its struct.
  std::uint64_t live_leases = 0;
  std::uint64_t leased_bytes = 0;
  // The residency account and the migration ledger (docs/residency.md), all devices summed.
  std::uint64_t resident_bytes = 0;             ///< placed on devices by plans (replicas too)
  std::uint64_t residency_to_device_bytes = 0;  ///< moved host -> device by plans
  std::uint64_t residency_to_host_bytes = 0;    ///< moved device -> host by evictions
  /// The driver's counters as of the last residency report or snapshot (they are taken in
  /// there, not here: a stats request stays cheap); zero while they are off.
  std::uint64_t driver_to_device_bytes = 0;
  std::uint64_t driver_to_host_bytes = 0;
  std::uint64_t driver_page_faults = 0;  ///< CPU page faults and GPU fault groups
  // The tiers and the copy engines' moves (docs/design.md "Tiers").
  std::uint64_t host_tier_bytes = 0;       ///< pinned host memory held (charged bytes)
  std::uint64_t device_tier_bytes = 0;     ///< device memory held (charged bytes)
  std::uint64_t copy_to_device_bytes = 0;  ///< copied from the host tier to device-side memory
  std::uint64_t copy_to_host_bytes = 0;    ///< copied from device-side memory to the host tier
  std::uint64_t copy_other_bytes = 0;      ///< copied within one side
  std::uint64_t copies = 0;                ///< copies enqueued
  /// Failed requests per error code, indexed by `static_cast<size_t>(errc)`.
  std::array<std::uint64_t, errc_slots> failures{};

  /// Failures of one code.
  [[nodiscard]] std::uint64_t failures_of(errc code) const noexcept {
    return failures[static_cast<std::size_t>(code)];
  }
  /// Sum of failures of every code.
  [[nodiscard]] std::uint64_t total_failures() const noexcept;

  friend bool operator==(const allocator_stats&, const allocator_stats&) = default;
};

/// A multi-line human-readable rendering.
[[nodiscard]] std::string to_string(const allocator_stats& s);

}  // namespace uma
