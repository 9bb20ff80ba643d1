#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <uma/memory/allocator_stats.hpp>
#include <uma/memory/label_rows.hpp>
#include <uma/memory/region_info.hpp>
#include <uma/messages/requests.hpp>
#include <uma/messages/supervision_types.hpp>

namespace uma {

/// Live regions and bytes of the regions that carry one label (a tenant, a buffer family).
struct label_usage {
  std::string label{};
  std::uint64_t regions = 0;
  std::uint64_t bytes = 0;
  friend bool operator==(const label_usage&, const label_usage&) = default;
};

/// Everything one scrape knows about an allocator: what `to_prometheus` renders.
struct metrics_snapshot {
  allocator_stats allocator{};
  /// Present when the allocator runs under a supervisor that answered `supervision_atom`.
  std::optional<supervision_stats> supervision{};
  /// Present when the region table was asked for: live usage by label, sorted by label.
  std::optional<std::vector<label_usage>> labels{};
  /// Present when the allocator has devices to budget: its residency account and ledger
  /// (docs/residency.md).
  std::optional<residency_report> residency{};
};

/// Sums `regions` by label, sorted by label. Past `max_labels` distinct labels the rest are
/// counted under the label "(other)", so a label per request cannot blow up a time series
/// database.
[[nodiscard]] std::vector<label_usage> usage_by_label(const std::vector<region_info>& regions,
                                                      std::size_t max_labels = max_metric_labels);

}  // namespace uma
