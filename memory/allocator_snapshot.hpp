#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <uma/memory/allocator_stats.hpp>
#include <uma/memory/event_history.hpp>
#include <uma/memory/migration_ledger.hpp>
#include <uma/memory/region_info.hpp>
#include <uma/memory/residency_types.hpp>
#include <uma/sys/location.hpp>

namespace uma {

/// How a region's memory is held. The values are the wire's: 1 (a block of the pool policy's
/// own slabs) was retired when the `pool` policy's small requests became blocks.
enum class region_policy : std::uint8_t {
  direct = 0,  ///< its own backend allocation
  slab = 2,    ///< a slab of the block allocator (carved into small blocks)
  block = 3,   ///< a labelled block of the block allocator: a row of its own, its bytes in a slab
};

/// A region's residency (docs/residency.md), present once a plan named it or the driver counted
/// something in it.
struct region_residency {
  int device = -1;              ///< the device the account holds it on (-1: none)
  std::string policy = "none";  ///< the policy it was last placed with ("none": never placed)
  residency_ledger moves{};     ///< uma's own moves
  driver_ledger driver{};       ///< the driver's counters (zero when there are none)
  friend bool operator==(const region_residency&, const region_residency&) = default;
};

/// One region of a snapshot: the report row and what the allocator knows about its memory.
struct region_snapshot {
  region_info info{};
  region_policy policy = region_policy::direct;
  /// The advice the allocator applied to the whole region ("none", "read_mostly, preferred
  /// device 0", or "unknown" once part of it was advised through a sub-view).
  std::string advice = "none";
  std::optional<location> last_prefetch{};  ///< the last prefetch asked for, if any
  std::optional<region_residency> residency{};
  friend bool operator==(const region_snapshot&, const region_snapshot&) = default;
};

/// Everything one allocator incarnation can tell about itself at one moment (`snapshot_atom`,
/// `client::snapshot`, `uma snapshot`).
struct allocator_snapshot {
  std::int64_t taken_at_ns = 0;  ///< system clock, nanoseconds since the Unix epoch
  std::uint64_t generation = 0;
  std::string backend{};
  allocator_stats stats{};
  std::vector<region_snapshot> regions{};  ///< sorted by id
  std::vector<allocator_event> events{};   ///< oldest first
  std::uint64_t events_dropped = 0;        ///< overwritten by newer ones (the ring was full)
  std::uint64_t event_capacity = 0;        ///< 0: the history is off
};

/// "direct", "slab", "block".
[[nodiscard]] inline const char* to_string(region_policy p) noexcept {
  switch (p) {
    case region_policy::slab:
      return "slab";
    case region_policy::block:
      return "block";
    case region_policy::direct:
      break;
  }
  return "direct";
}

}  // namespace uma
