#pragma once

// Rows by label, cut to a bound: what the metrics' label families and the residency report's
// labels share (the allocator folds its report's rows, the metrics endpoint its label usage).

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace uma {

/// The most labels a metric family or the residency report lists; the rest are summed under
/// "(other)", so that a label per request cannot blow up a time series database.
inline constexpr std::size_t max_metric_labels = 100;

/// The rows of `by_label` in its order, each with its label set; past `max_labels` rows the rest
/// are summed into one row labelled "(other)" with `add(other, row)`.
template <class Row, class Key, class Add>
[[nodiscard]] std::vector<Row> fold_labels(std::map<Key, Row>& by_label, std::size_t max_labels,
                                           Add add) {
  std::vector<Row> out;
  Row other{};
  other.label = "(other)";
  for (auto& [label, row] : by_label) {
    if (out.size() < max_labels) {
      row.label = std::string(label);
      out.push_back(std::move(row));
    } else {
      add(other, row);
    }
  }
  if (by_label.size() > max_labels)
    out.push_back(std::move(other));
  return out;
}

}  // namespace uma
