#pragma once

// The report of a serving node's arbiter (actors/remote/arbiter/arbiter_types.hpp) as JSON: what
// `uma budgets --json` prints (with "server") and `uma snapshot --connect` embeds as "arbiter".

#include <boost/json/object.hpp>

#include <uma/actors/remote/arbiter/arbiter_types.hpp>

namespace uma::cli {

/// `r` with every text the server sent (tenants, states, the decisions' reasons) escaped as
/// `detail::escape_control` does: the server at --connect may not be uma's.
[[nodiscard]] arbiter_report printable(arbiter_report r);

/// The report as one JSON object: members, revocations, devices (device, total_bytes,
/// held_bytes, members: member, tenant, state, granted_bytes, held_bytes, resident_bytes, the
/// claim's min_bytes, wanted_bytes, priority, weight and idle, grown_bytes, shrunk_bytes,
/// shrinks, slowest_shrink_ms) and decisions (at_ms, member, tenant, device, from_bytes,
/// to_bytes, why; oldest first).
[[nodiscard]] boost::json::object to_json_object(const arbiter_report& r);

}  // namespace uma::cli
