#pragma once

// The residency figures as JSON objects, in one place: the keys of `uma snapshot --json`'s
// per-region residency and of the C ABI's uma_residency_json (docs/residency.md). `Object` is a
// JSON object type with an initializer-list constructor (boost::json::object): memory/ itself
// does not depend on a JSON library.

#include <uma/memory/device_residency.hpp>
#include <uma/memory/migration_ledger.hpp>
#include <uma/memory/residency_types.hpp>

namespace uma {

/// uma's own moves (a residency_ledger) under their member names.
template <class Object>
[[nodiscard]] Object residency_ledger_json(const residency_ledger& l) {
  return {{"to_device_bytes", l.to_device_bytes},
          {"to_host_bytes", l.to_host_bytes},
          {"dropped_bytes", l.dropped_bytes},
          {"discarded_bytes", l.discarded_bytes},
          {"placements", l.placements},
          {"evictions", l.evictions},
          {"refetches", l.refetches}};
}

/// The driver's counters (a driver_ledger) under their member names.
template <class Object>
[[nodiscard]] Object driver_ledger_json(const driver_ledger& d) {
  return {{"to_device_bytes", d.to_device_bytes},
          {"to_host_bytes", d.to_host_bytes},
          {"prefetched_to_device_bytes", d.prefetched_to_device_bytes},
          {"prefetched_to_host_bytes", d.prefetched_to_host_bytes},
          {"cpu_page_faults", d.cpu_page_faults},
          {"gpu_page_faults", d.gpu_page_faults},
          {"thrashing_bytes", d.thrashing_bytes},
          {"throttled", d.throttled},
          {"remote_map_bytes", d.remote_map_bytes}};
}

/// One device's (or one tenant's on one device) account, the byte counts named `..._bytes`.
template <class Object>
[[nodiscard]] Object device_residency_json(const device_residency& d) {
  return {{"memory_bytes", d.memory},
          {"budget_bytes", d.budget},
          {"resident_bytes", d.resident},
          {"peak_bytes", d.peak},
          {"held_bytes", d.held}};
}

}  // namespace uma
