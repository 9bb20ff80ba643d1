#pragma once

// The Prometheus text exposition format (version 0.0.4) of an allocator's counters: what
// `uma stats --prometheus` prints and what `uma::metrics_endpoint` serves at GET /metrics.
// One table of metric families drives it (actors/metrics/prometheus_text.cpp); docs/cli.md lists
// them.

#include <string>
#include <string_view>

#include <uma/actors/metrics/metrics_snapshot.hpp>

namespace uma {

/// The content type of `to_prometheus`'s text, for an HTTP response.
inline constexpr std::string_view prometheus_content_type =
    "text/plain; version=0.0.4; charset=utf-8";

/// Every family of the table that `s` has samples for: a `# HELP` and a `# TYPE` line, then its
/// samples, each labelled `backend` and `generation` (plus `code`, `label` or `state` where the
/// family has one). Counters end in `_total`, sizes in `_bytes`; failures have one sample per
/// error code, zeros included, so rates work from the first scrape.
[[nodiscard]] std::string to_prometheus(const metrics_snapshot& s);

/// The allocator's own families only (no supervision, no labels).
[[nodiscard]] std::string to_prometheus(const allocator_stats& s);

/// `text` as a label value: backslash, double quote and newline escaped.
[[nodiscard]] std::string prometheus_escape(std::string_view text);

}  // namespace uma
