#pragma once

// Machine-readable renderings of an allocator's counters: JSON for scripts, the Prometheus text
// exposition format (version 0.0.4) for scrapers. CAF-free, so tests and exporters can use them
// on any `allocator_stats` value.

#include <cstdint>
#include <string>
#include <string_view>

#include <uma/memory/allocator_stats.hpp>

namespace uma::cli {

/// One JSON object, keys named as the `allocator_stats` fields, `failures` as an object keyed by
/// error code name (every code, zeros included), plus `total_failures`. Pretty-printed, ends
/// with a newline.
[[nodiscard]] std::string to_json(const allocator_stats& s);

/// The Prometheus text exposition of the same counters: for each metric family a `# HELP` and a
/// `# TYPE` line, then its sample labelled `backend` and `generation`; counters end in `_total`,
/// sizes in `_bytes`; failures are `uma_failures_total` with one sample per error code (zeros
/// included, so rates work from the first scrape).
[[nodiscard]] std::string to_prometheus(const allocator_stats& s);

/// `text` as the body of a JSON string (quotes, backslashes and control characters escaped).
[[nodiscard]] std::string json_escape(std::string_view text);

/// `text` as a Prometheus label value (backslash, double quote and newline escaped).
[[nodiscard]] std::string prometheus_escape(std::string_view text);

/// "11.8 GiB", "256.0 KiB", "100 bytes".
[[nodiscard]] std::string human_bytes(std::uint64_t bytes);

}  // namespace uma::cli
