#pragma once

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <uma/sys/backend.hpp>

namespace uma::bench {

/// uma_bench's command line.
struct options {
  backend_choice backend = backend_choice::automatic;
  bool smoke = false;    ///< tiny sizes, few iterations: proves the binary runs, times nothing
  std::set<int> only{};  ///< sections to run; empty: all
  int iterations = 0;    ///< timed samples per latency measurement; 0: the mode's default
  int warmup = -1;       ///< untimed iterations first; -1: the mode's default
  int duration_ms = 0;   ///< length of one throughput point; 0: the mode's default
  /// Experiments on CAF's scheduler and the allocator's thread (defaults: CAF's, scheduled).
  int caf_threads = 0;             ///< scheduler.max-threads; 0: CAF's default
  std::string caf_policy{};        ///< scheduler.policy: "stealing" or "sharing"; empty: CAF's
  int caf_moderate_sleep_us = -1;  ///< work-stealing.moderate-sleep-duration; -1: CAF's (50 us)
  bool detached = false;           ///< allocator_config::supervision.detached (its own thread)
  std::string policy{};            ///< sections 1, 2: "pool" or "direct" only; empty: both
  std::string json_path{};
  std::string plot_path{};
  bool help = false;

  /// True when section `n` is selected.
  [[nodiscard]] bool runs(int n) const { return only.empty() || only.count(n) != 0; }
  /// True when sections 1 and 2 measure the allocator with `name` ("pool" or "direct").
  [[nodiscard]] bool measures(const std::string& name) const {
    return policy.empty() || policy == name;
  }
  /// Iterations, warm-up and throughput duration with the mode's defaults applied.
  [[nodiscard]] int samples() const { return iterations > 0 ? iterations : smoke ? 20 : 1000; }
  [[nodiscard]] int warmups() const {
    return warmup >= 0 ? warmup : std::max(smoke ? 3 : 10, samples() / 10);
  }
  [[nodiscard]] double point_seconds() const {
    return (duration_ms > 0 ? duration_ms : smoke ? 20 : 500) / 1000.0;
  }
};

/// Parses argv; on a usage error returns nullopt and sets `error`.
[[nodiscard]] std::optional<options> parse_options(const std::vector<std::string>& args,
                                                   std::string& error);

/// The --help text.
[[nodiscard]] std::string usage();

}  // namespace uma::bench
