#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace uma::bench {

/// Order statistics of timed samples (nanoseconds): sorted, warm-up already excluded.
struct summary {
  std::size_t n = 0;
  double min = NAN;
  double median = NAN;
  double p99 = NAN;  ///< the sample at rank ceil(0.99 n)
  double max = NAN;
  double mean = NAN;
};
[[nodiscard]] summary summarize(std::vector<double> samples);

/// One reported figure and the same-run baseline it is compared with.
struct figure {
  std::string name;
  double value = NAN;
  std::string unit;      ///< "us", "ms", "GB/s", "pairs/s", "count"
  std::string baseline;  ///< what the baseline is; empty when the figure has none
  double baseline_value = NAN;
  std::string note{};
  /// value / baseline_value (NaN without a baseline).
  [[nodiscard]] double ratio() const noexcept { return value / baseline_value; }
};

/// A target of the issue, judged on this run's figure.
struct target {
  int section = 0;
  std::string goal;  ///< e.g. "median <= 2 us"
  figure fig;
  bool met = false;
};

/// A point of the allocation-latency curve.
struct latency_point {
  std::string variant;
  std::size_t bytes = 0;
  summary s;
};

/// A point of the throughput curve.
struct throughput_point {
  std::string variant;
  int clients = 0;
  double pairs_per_second = 0;
  std::uint64_t pairs = 0;
  double seconds = 0;
};

/// One section's outcome.
struct section {
  int id = 0;
  std::string title;
  std::string status = "ok";  ///< "ok", "skipped: <why>", "failed: <why>"
  std::vector<figure> figures;
  std::vector<std::string> notes;
};

/// Collects every figure of a run, prints each section as it completes (a table on stdout),
/// and renders the whole run as JSON and as gnuplot data.
class report {
 public:
  explicit report(std::ostream& out) : out_(out) {}

  /// A run-wide fact (backend, device, mode, ...): JSON "meta" and the header.
  void meta(std::string key, std::string value);
  /// Prints the header (the meta facts gathered so far).
  void print_header();
  /// Starts section `id` and prints its title.
  section& begin(int id, std::string title);
  /// Prints a pre-formatted block inside the current section (section 1's matrix).
  void print_block(const std::string& text);
  /// Prints the current section's figures, notes and status.
  void end(section& s);

  void add(target t) { targets_.push_back(std::move(t)); }
  void add(latency_point p) { latency_.push_back(std::move(p)); }
  void add(throughput_point p) { throughput_.push_back(std::move(p)); }
  /// Records a failure (the run exits 1) and prints it.
  void fail(const std::string& what);
  [[nodiscard]] bool failed() const noexcept { return !failures_.empty(); }

  /// Prints the targets with their baselines and verdicts.
  void print_targets();
  [[nodiscard]] std::string json() const;
  /// Two gnuplot data blocks (`index 0`: size -> median/p99 per variant in us; `index 1`:
  /// clients -> pairs/s per variant), each with a column-header line.
  [[nodiscard]] std::string plot_data() const;

 private:
  std::ostream& out_;
  std::vector<std::pair<std::string, std::string>> meta_;
  std::deque<section> sections_;
  std::vector<target> targets_;
  std::vector<latency_point> latency_;
  std::vector<throughput_point> throughput_;
  std::vector<std::string> failures_;
};

/// "64 KiB", "1 GiB", "256 B".
[[nodiscard]] std::string size_text(std::size_t bytes);
/// A number with a precision that suits its magnitude ("1.23", "45.6", "123456").
[[nodiscard]] std::string number_text(double v);

}  // namespace uma::bench
