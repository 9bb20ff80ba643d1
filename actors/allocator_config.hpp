#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <uma/memory/allocator_stats.hpp>
#include <uma/memory/resource_stack_config.hpp>
#include <uma/memory/stop_report.hpp>
#include <uma/memory/vocabulary.hpp>
#include <uma/sys/backend.hpp>

namespace uma {

class event_history;  // memory/event_history.hpp

/// Which backend an incarnation runs on, and what it asks of the driver.
struct backend_config {
  /// Which backend to create (ignored when `instance` is given).
  backend_choice choice = backend_choice::automatic;
  /// A backend to use instead of creating one (tests: a fault-injecting decorator).
  std::shared_ptr<uma::backend> instance{};
  /// The devices a host backend created from `choice` emulates (sys/backend.hpp; one by
  /// default): prefetch, advice, budgets and plans take them as on CUDA, the moves recorded and
  /// counted, no data copied. Ignored on CUDA and when `instance` is given (its own count).
  emulated_devices host_devices{};
  /// The migration ledger's driver half (docs/residency.md): subscribe to the driver's
  /// unified-memory counters (CUPTI, loaded at run time, on the CUDA backend) and attribute them
  /// to regions. Off by default: the counters are process-wide and cost the driver some work
  /// on every migration and fault. When the backend cannot give them, the residency report says
  /// why and everything else works as before.
  bool driver_counters = false;

  /// `instance`, or else a backend made from `choice` and `host_devices` (throws as
  /// `make_backend` does: `cuda` without a usable device is `uma::error(no_device)`).
  [[nodiscard]] std::shared_ptr<uma::backend> resolve() const {
    return instance ? instance : make_backend(choice, host_devices);
  }
};

/// The residency account's budgets (docs/residency.md), set when the incarnation starts; a
/// supervisor keeps the ones set through it here (actors/allocator_settings.hpp).
struct residency_budgets {
  /// Device budgets: (device, bytes).
  std::vector<std::pair<int, std::uint64_t>> device_budgets{};
  /// Tenant budgets (docs/residency.md "Tenants"): (tenant, device, bytes).
  std::vector<std::tuple<std::string, int, std::uint64_t>> tenant_budgets{};
  /// What a plan these budgets cannot hold gets (docs/residency.md "Overflow"): `refuse`
  /// (quota_exceeded), or `map`: what fits is placed and the rest mapped remotely for the
  /// device. A value that does not exist is refused at start (invalid_argument).
  budget_overflow overflow = budget_overflow::refuse;
};

/// How one incarnation lives among its predecessors and successors: its number, how it stops,
/// who hears of the stop, the history that spans restarts, and the thread it runs on. A
/// supervisor fills the first four per incarnation; `detached` is how any runner starts it.
struct supervision_config {
  /// Incarnation number; refs of other generations are inert for this allocator.
  std::uint64_t generation = 1;
  /// How long post_stop waits for pins to be released before leaking what is still pinned.
  std::chrono::milliseconds drain_timeout{5000};
  /// Called at the end of post_stop with the incarnation's final counters and what post_stop
  /// did (a supervisor keeps per-generation totals with it). Runs where the stop runs: on the
  /// actor's thread, or on the thread that dropped its last handle.
  std::function<void(const allocator_stats&, const stop_report&)> on_stop{};
  /// Capacity of the event history (memory/event_history.hpp) that snapshots report: the last
  /// this many allocations, releases, prefetches, advice, discards, stops and restarts. 0
  /// turns it off.
  std::size_t event_history = 4096;
  /// A history to record into instead of a new one of `event_history` slots: a supervisor
  /// hands the same one to every incarnation, so that it spans restarts.
  std::shared_ptr<uma::event_history> history{};
  /// Run the actor on its own thread rather than on CAF's scheduler.
  bool detached = false;
};

/// How an allocator incarnation is set up, by concern.
struct allocator_config {
  /// Which backend, and what it asks of the driver.
  backend_config backend{};
  /// How allocations are served (memory/resource_stack.hpp): policy (`direct` by default, or
  /// `pool`: small typed requests are blocks), quota, and the block allocator's slab size and
  /// largest block. A quota of 0 takes
  /// the backend's default (on CUDA 3/4 of the smallest free device memory at start, on the
  /// host half of physical memory).
  resource_stack_config memory{};
  /// The residency account's budgets.
  residency_budgets residency{};
  /// Generation, stop, history and thread.
  supervision_config supervision{};
};

}  // namespace uma
