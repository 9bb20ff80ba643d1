#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <uma/sys/backend.hpp>
#include <uma/sys/location.hpp>

namespace uma {

/// A range to act on, with the allocation it lies in (ranges of different allocations are never
/// merged: one runtime call may not span two allocations) and where it goes.
struct keyed_range {
  std::uint64_t allocation = 0;
  byte_range range{};
  location where = location::host();
};

/// Ranges ready for the backend: `locations` has one entry (broadcast) or one per range.
struct coalesced_ranges {
  std::vector<byte_range> ranges;
  std::vector<location> locations;
};

/// Merges adjacent and overlapping ranges of the same allocation that go to the same location
/// (blocks of one slab are adjacent), ordered by location then address.
[[nodiscard]] coalesced_ranges coalesce(std::vector<keyed_range> in);

}  // namespace uma
