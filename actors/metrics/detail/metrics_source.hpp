#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include <uma/actors/metrics/metrics_snapshot.hpp>
#include <uma/messages/interface.hpp>

namespace uma::detail {

/// Asks an allocator (and its supervisor, when there is one) for what a scrape shows, by
/// message: each fetch spawns a short-lived event-based actor that sends `stats_atom`, then
/// `regions_atom` (when labels are wanted and the last labels are older than the labels interval:
/// a region report costs the allocator's loop a walk of its whole table) and `supervision_atom`
/// (with a supervisor), each with a timeout, and hands the outcome to a callback. Nothing blocks,
/// no actor waits on another.
class metrics_source {
 public:
  /// What a fetch ends with: a snapshot, or why there is none.
  struct outcome {
    std::optional<metrics_snapshot> snapshot{};
    std::string error{};  ///< "stats: ..." naming the request that failed; empty on success
  };
  /// Called once per fetch, on a CAF worker thread.
  using callback = std::function<void(outcome)>;

  /// `supervisor` may be null (a bare allocator). `sys` must outlive every fetch's reply.
  metrics_source(caf::actor_system& sys, managed_allocator_actor allocator,
                 allocator_supervisor_actor supervisor, std::chrono::milliseconds timeout,
                 bool labels, std::chrono::milliseconds labels_interval = {});

  /// The whole snapshot: stats, labels (when configured), supervision (with a supervisor).
  void fetch(callback done) const;

  /// Health only: the supervisor's state (with a supervisor), then whether the allocator
  /// answers `stats_atom` in time. `outcome::error` says why it is unhealthy.
  void probe(callback done) const;

  /// What `snapshot` ends with: the snapshot, or why there is none.
  struct snapshot_outcome {
    std::optional<allocator_snapshot> snapshot{};
    std::string error{};   ///< empty on success
    bool stopped = false;  ///< the allocator (or its supervisor) has stopped
  };
  /// Asks the allocator for its snapshot (`snapshot_atom`) and hands the outcome to `done`, on
  /// a CAF worker thread.
  void snapshot(std::function<void(snapshot_outcome)> done) const;

 private:
  caf::actor_system& sys_;
  managed_allocator_actor allocator_;
  allocator_supervisor_actor supervisor_;
  std::chrono::milliseconds timeout_;
  bool labels_;
  /// The last labels and when they were read, shared with the fetches in flight.
  struct labels_cache {
    std::mutex mutex;
    std::optional<std::chrono::steady_clock::time_point> read{};
    std::vector<label_usage> labels{};
    std::chrono::milliseconds interval{};
  };
  std::shared_ptr<labels_cache> cache_;
};

}  // namespace uma::detail
