#pragma once

#include <cstdint>
#include <string_view>

namespace uma {

/// Memory advice, as `cudaMemAdvise` takes it. Which advice needs which location kind is checked
/// by `memory/location_rules.hpp`.
enum class advice : std::uint8_t {
  set_read_mostly = 1,
  unset_read_mostly,
  set_preferred_location,
  unset_preferred_location,
  set_accessed_by,
  unset_accessed_by,
};

/// "set_read_mostly", ...
[[nodiscard]] std::string_view to_string(advice a) noexcept;

/// True for advice that names a location (preferred location, accessed by).
[[nodiscard]] constexpr bool advice_takes_location(advice a) noexcept {
  return a == advice::set_preferred_location || a == advice::set_accessed_by ||
         a == advice::unset_accessed_by;
}

}  // namespace uma
