#pragma once

// The driver's half of the migration ledger (issue 15, docs/residency.md): the unified-memory
// counters the driver reports (sys/um_counters.hpp: CUPTI on the CUDA backend), attributed to
// uma's regions by address and summed per region, per label and in all. uma's own moves are the
// residency account's half (memory/residency_account.hpp). CAF-free and backend-free; one owner.

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <uma/sys/um_counters.hpp>

namespace uma {

/// What the driver counted for a region (or a label, or all of them).
struct driver_ledger {
  std::uint64_t to_device_bytes = 0;  ///< host -> device, every cause
  std::uint64_t to_host_bytes = 0;    ///< device -> host, every cause
  /// Of the moves above, those an explicit prefetch asked for (uma's, or anyone's); the rest
  /// the driver made on its own: faults, evictions, its speculative prefetch.
  std::uint64_t prefetched_to_device_bytes = 0;
  std::uint64_t prefetched_to_host_bytes = 0;
  std::uint64_t cpu_page_faults = 0;
  std::uint64_t gpu_page_faults = 0;  ///< fault groups
  std::uint64_t thrashing_bytes = 0;  ///< bytes the driver saw thrash between processors
  std::uint64_t throttled = 0;        ///< times the driver throttled faults on a page
  std::uint64_t remote_map_bytes = 0;
  driver_ledger& operator+=(const driver_ledger& o) noexcept;
  friend bool operator==(const driver_ledger&, const driver_ledger&) = default;
};

/// Adds one record's `value` (or, for a move, `bytes` of it) to `l`.
void count(driver_ledger& l, const um_counter_record& r, std::uint64_t bytes) noexcept;

/// A live region's address range.
struct ledger_range {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;  ///< one past the last byte
  std::uint64_t region = 0;
};

/// Not thread-safe: one owner.
class migration_ledger {
 public:
  /// `label_of(region)`: a region's label, asked once, when a record first names the region.
  explicit migration_ledger(std::function<std::string(std::uint64_t)> label_of);

  /// Attributes `records` to `ranges` (sorted by begin, disjoint): a move's or a remote map's
  /// bytes are split over the regions they overlap, a fault or thrashing record goes to the
  /// region holding its address; what no region holds is unattributed.
  void add(std::span<const um_counter_record> records, std::span<const ledger_range> ranges);
  /// Region `id` was freed: its counts stay in its label's and in the totals.
  void forget(std::uint64_t id);

  [[nodiscard]] const driver_ledger* region(std::uint64_t id) const noexcept;
  [[nodiscard]] const driver_ledger& totals() const noexcept { return totals_; }
  /// Counts at addresses no live region held (another allocator's memory, a freed region's).
  [[nodiscard]] const driver_ledger& unattributed() const noexcept { return unattributed_; }
  /// Per label, live and freed regions together, sorted by label.
  [[nodiscard]] const std::map<std::string, driver_ledger>& by_label() const noexcept {
    return by_label_;
  }

 private:
  struct entry {
    std::string label;
    driver_ledger ledger;
  };
  void count_in(std::uint64_t region, const um_counter_record& r, std::uint64_t bytes);

  std::function<std::string(std::uint64_t)> label_of_;
  std::unordered_map<std::uint64_t, entry> regions_;
  std::map<std::string, driver_ledger> by_label_;
  driver_ledger totals_;
  driver_ledger unattributed_;
};

}  // namespace uma
