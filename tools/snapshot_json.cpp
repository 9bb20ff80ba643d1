#include "tools/snapshot_json.hpp"

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <uma/memory/residency_json.hpp>

#include "tools/json_print.hpp"
#include "tools/stats_format.hpp"

namespace uma::cli {

namespace {

boost::json::object residency_json(const region_residency& r) {
  return {{"device", r.device >= 0 ? boost::json::value(r.device) : boost::json::value(nullptr)},
          {"policy", r.policy},
          {"moves", residency_ledger_json<boost::json::object>(r.moves)},
          {"driver", driver_ledger_json<boost::json::object>(r.driver)}};
}

boost::json::object region_json(const region_snapshot& r) {
  const auto& i = r.info;
  boost::json::object o;
  o["id"] = i.id;
  o["generation"] = i.generation;
  o["label"] = i.label;
  o["bytes"] = i.bytes;
  o["policy"] = to_string(r.policy);
  o["attach"] = i.attach == attach_flag::host ? "host" : "global";
  o["advice"] = r.advice;
  if (r.last_prefetch)
    o["last_prefetch"] = to_string(*r.last_prefetch);
  else
    o["last_prefetch"] = nullptr;
  o["refs"] = i.refs;
  o["pins"] = i.pins;
  o["age_ms"] = i.age_ms;
  if (r.residency)
    o["residency"] = residency_json(*r.residency);
  else
    o["residency"] = nullptr;
  return o;
}

boost::json::object event_json(const allocator_event& e) {
  boost::json::object o;
  o["time_ns"] = e.time_ns;
  o["kind"] = to_string(e.kind);
  o["generation"] = e.generation;
  o["region"] = e.region;
  o["bytes"] = e.bytes;
  o["label"] = e.label;
  o["detail"] = e.detail;
  return o;
}

}  // namespace

boost::json::object to_json_object(const allocator_snapshot& s) {
  boost::json::object o;
  o["taken_at_ns"] = s.taken_at_ns;
  o["generation"] = s.generation;
  o["backend"] = s.backend;
  o["stats"] = to_json_object(s.stats);
  boost::json::array regions;
  for (const auto& r : s.regions)
    regions.push_back(region_json(r));
  o["regions"] = std::move(regions);
  boost::json::array events;
  for (const auto& e : s.events)
    events.push_back(event_json(e));
  o["events"] = std::move(events);
  o["events_dropped"] = s.events_dropped;
  o["event_capacity"] = s.event_capacity;
  return o;
}

std::string to_json(const allocator_snapshot& s) {
  return pretty_json(to_json_object(s), 2);
}

}  // namespace uma::cli
