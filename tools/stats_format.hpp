#pragma once

// Machine-readable renderings of an allocator's counters for the tool: JSON through Boost.JSON
// (the Prometheus text is the library's: <uma/actors/metrics/prometheus_text.hpp>). CAF-free, so
// tests and exporters can use them on any `allocator_stats` value.

#include <cstdint>
#include <string>

#include <boost/json/object.hpp>

#include <uma/memory/allocator_stats.hpp>

namespace uma::cli {

/// The counters as a JSON object: keys named as the `allocator_stats` fields, `failures` an
/// object keyed by error code name (every code, zeros included), then `total_failures`.
[[nodiscard]] boost::json::object to_json_object(const allocator_stats& s);

/// `to_json_object(s)` pretty-printed, ending with a newline.
[[nodiscard]] std::string to_json(const allocator_stats& s);

/// "11.8 GiB", "256.0 KiB", "100 bytes".
[[nodiscard]] std::string human_bytes(std::uint64_t bytes);

}  // namespace uma::cli
