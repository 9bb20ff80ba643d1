#pragma once

// uma's plain types, for users and messages that name a few of them without the classes that
// use them: sys/vocabulary.hpp's (location, memory_kind, advice, attach_flag, stream_view,
// backend_kind) and the residency words (residency_policy, access_mode, budget_overflow).

#include <cstdint>
#include <optional>
#include <string_view>

#include <uma/sys/vocabulary.hpp>

namespace uma {

/// How a region lives when a device uses it under a budget.
enum class residency_policy : std::uint8_t {
  migrate,      ///< prefetched to the device before use, prefetched back to the host on eviction
  read_mostly,  ///< duplicated on the device; eviction drops the copy (nothing moves back)
  remote_map,   ///< stays on the host, mapped for the device: never resident, never moved
  discard,      ///< scratch: prefetched before use, its contents dropped on eviction
  automatic,    ///< chosen per access by the account (see will_access)
};

/// How a plan touches its regions.
enum class access_mode : std::uint8_t { read, write };

/// What a plan gets when a device's (or a tenant's) budget cannot hold all of it, after the
/// least recently used regions no plan holds were evicted (docs/residency.md "Overflow").
enum class budget_overflow : std::uint8_t {
  refuse,  ///< the plan is refused with quota_exceeded and changes nothing
  /// what fits is placed, in the plan's order; the rest is mapped remotely for the device, as
  /// the remote_map policy maps a region (never resident, charged to no budget)
  map,
};

[[nodiscard]] std::string_view to_string(residency_policy p) noexcept;
[[nodiscard]] std::optional<residency_policy> parse_residency_policy(std::string_view s) noexcept;

}  // namespace uma
