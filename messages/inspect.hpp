#pragma once

// CAF inspection of the plain values that sys/ and memory/ define and messages carry. They live
// here, in the first layer that knows CAF, so that sys/ and memory/ stay free of CAF's
// vocabulary. Include this (messages/atoms.hpp does) before a type is serialized: CAF finds
// `inspect` by argument-dependent lookup at the point where it serializes.

#include <uma/memory/allocator_stats.hpp>
#include <uma/memory/event_history.hpp>
#include <uma/memory/region_info.hpp>
#include <uma/memory/stats_fields.hpp>
#include <uma/messages/requests.hpp>
#include <uma/sys/location.hpp>

namespace uma {

/// Locations cross process boundaries in the remote interface.
template <class Inspector>
auto inspect(Inspector& f, location& x) {
  return f(x.type, x.id);
}

/// One row of the outstanding-allocation report.
template <class Inspector>
auto inspect(Inspector& f, region_info& x) {
  return f(x.id, x.generation, x.bytes, x.label, x.attach, x.refs, x.pins, x.age_ms, x.kind);
}

/// An incarnation's counters (embedded in the remote interface's `remote_stats`): every field of
/// the table (memory/stats_fields.hpp), in its order.
template <class Inspector>
auto inspect(Inspector& f, allocator_stats& x) {
  return std::apply([&](const auto&... field) { return f(x.*field.member...); },
                    allocator_stats_fields);
}

/// What an access plan or dead did (the reply of the remote interface's plans too).
template <class Inspector>
auto inspect(Inspector& f, residency_result& x) {
  return f(x.to_device_bytes, x.to_host_bytes, x.dropped_bytes, x.discarded_bytes, x.mapped_bytes,
           x.placements, x.evictions, x.overflow_bytes);
}

/// One entry of the event history (embedded in the remote interface's `remote_snapshot`).
template <class Inspector>
auto inspect(Inspector& f, allocator_event& x) {
  return f(x.time_ns, x.kind, x.generation, x.region, x.bytes, x.label, x.detail);
}

}  // namespace uma
