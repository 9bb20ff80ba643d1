#pragma once

// uma's plain types, for users and messages that name a few of them without the classes that
// use them: sys/vocabulary.hpp's (location, memory_kind, advice, attach_flag, stream_view,
// backend_kind) and the residency words (residency_policy, access_mode).

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

[[nodiscard]] std::string_view to_string(residency_policy p) noexcept;
[[nodiscard]] std::optional<residency_policy> parse_residency_policy(std::string_view s) noexcept;

}  // namespace uma
