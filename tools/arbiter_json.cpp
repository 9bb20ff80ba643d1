#include "tools/arbiter_json.hpp"

#include <utility>

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <uma/actors/remote/detail/remote_checks.hpp>

namespace uma::cli {

namespace {

[[nodiscard]] boost::json::object member_json(const arbiter_member_row& m) {
  return {{"member", m.member},
          {"tenant", m.tenant},
          {"state", m.state},
          {"granted_bytes", m.granted_bytes},
          {"held_bytes", m.held_bytes},
          {"resident_bytes", m.resident_bytes},
          {"min_bytes", m.claim.min_bytes},
          {"wanted_bytes", m.claim.wanted_bytes},
          {"priority", m.claim.priority},
          {"weight", m.claim.weight},
          {"idle", m.claim.idle},
          {"grown_bytes", m.grown_bytes},
          {"shrunk_bytes", m.shrunk_bytes},
          {"shrinks", m.shrinks},
          {"slowest_shrink_ms", m.slowest_shrink.count()}};
}

[[nodiscard]] boost::json::object decision_json(const arbiter_decision& d) {
  return {{"at_ms", d.at.count()}, {"member", d.member},         {"tenant", d.tenant},
          {"device", d.device},    {"from_bytes", d.from_bytes}, {"to_bytes", d.to_bytes},
          {"why", d.why}};
}

}  // namespace

arbiter_report printable(arbiter_report r) {
  for (auto& d : r.devices)
    for (auto& m : d.members) {
      m.tenant = detail::escape_control(m.tenant);
      m.state = detail::escape_control(m.state);
    }
  for (auto& d : r.decisions) {
    d.tenant = detail::escape_control(d.tenant);
    d.why = detail::escape_control(d.why);
  }
  return r;
}

boost::json::object to_json_object(const arbiter_report& r) {
  boost::json::array devices;
  for (const auto& d : r.devices) {
    boost::json::array members;
    for (const auto& m : d.members)
      members.emplace_back(member_json(m));
    devices.emplace_back(boost::json::object{{"device", d.device},
                                             {"total_bytes", d.total_bytes},
                                             {"held_bytes", d.held_bytes},
                                             {"members", std::move(members)}});
  }
  boost::json::array decisions;
  for (const auto& d : r.decisions)
    decisions.emplace_back(decision_json(d));
  return {{"members", r.members},
          {"revocations", r.revocations},
          {"devices", std::move(devices)},
          {"decisions", std::move(decisions)}};
}

}  // namespace uma::cli
