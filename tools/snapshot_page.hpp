#pragma once

// `uma snapshot --html`: one self-contained page (inline CSS and vanilla JavaScript, the data
// embedded as JSON; nothing fetched from the network) that draws an allocator snapshot.

#include <string>
#include <string_view>

#include <boost/json/object.hpp>

#include <uma/memory/allocator_snapshot.hpp>

namespace uma::cli {

/// `json` made safe to embed in a <script> element: `<`, `>` and `&` become JSON's \u escapes
/// (they can only occur inside JSON strings, where the escape means the same), so user data
/// such as a label "</script>" cannot end the element.
[[nodiscard]] std::string script_safe(std::string_view json);

/// The page: a summary header, live bytes over time stacked by label (an SVG drawn from the
/// event history), the region table (click a header to sort, type to filter) and the events.
[[nodiscard]] std::string snapshot_page(const allocator_snapshot& s);

/// The page for snapshot data as `to_json_object` makes it. A serving node's snapshot (`uma
/// snapshot --connect`) adds "server", which the summary names, each region's "session", which
/// becomes a column of the region table, and where the node has an arbiter "arbiter" (its
/// report, tools/arbiter_json.hpp), which adds a section "Arbiter": each device's total and
/// held bytes, the members' table and the ledger's decisions. Without "arbiter" the page has
/// no such section.
[[nodiscard]] std::string snapshot_page(const boost::json::object& data);

}  // namespace uma::cli
