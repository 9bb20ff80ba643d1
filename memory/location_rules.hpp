#pragma once

#include <uma/sys/advice.hpp>
#include <uma/sys/backend.hpp>
#include <uma/sys/location.hpp>

namespace uma {

/// The operations that take a location, each with its own rules (as CUDA 13 allows them).
enum class location_use : std::uint8_t {
  prefetch,            ///< device, host, host NUMA n, host NUMA current
  preferred_location,  ///< device, host, host NUMA n, host NUMA current
  accessed_by,         ///< a device only
  can_access,          ///< a device, or host
};

/// Throws `error(invalid_argument)` naming the operation and the location when `loc` is not
/// allowed for `use` or does not exist on `b` (device ordinal, NUMA node).
void validate_location(const backend& b, location_use use, const location& loc);

/// Validates the location of advice `a` (ignored, and not checked, for advice without one).
void validate_advice(const backend& b, advice a, const location& loc);

}  // namespace uma
