#pragma once

// An allocator snapshot (memory/allocator_snapshot.hpp) as JSON, for `uma snapshot --json` and
// the data the `--html` page embeds.

#include <string>

#include <boost/json/object.hpp>

#include <uma/memory/allocator_snapshot.hpp>

namespace uma::cli {

/// The snapshot as one JSON object: taken_at_ns, generation, backend, stats (as `uma stats
/// --json`), regions (id, generation, label, bytes, policy, attach, advice, last_prefetch or
/// null, refs, pins, age_ms), events (time_ns, kind, generation, region, bytes, label, detail;
/// oldest first), events_dropped, event_capacity.
[[nodiscard]] boost::json::object to_json_object(const allocator_snapshot& s);

/// `to_json_object(s)` pretty-printed, ending with a newline.
[[nodiscard]] std::string to_json(const allocator_snapshot& s);

}  // namespace uma::cli
