// `uma regions --connect unix:PATH|HOST:PORT`: a serving node's region table.

#include <iostream>
#include <string>
#include <vector>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <caf/actor_system.hpp>

#include <uma/actors/remote/detail/remote_checks.hpp>
#include <uma/actors/remote/remote_client.hpp>
#include "tools/cli_commands.hpp"
#include "tools/cli_hardening.hpp"
#include "tools/json_print.hpp"
#include "tools/stats_format.hpp"

namespace uma::cli {

namespace {

[[nodiscard]] std::string locations_text(const std::vector<location>& locs) {
  if (locs.empty())
    return "none";
  std::string out;
  for (const auto& l : locs)
    out += (out.empty() ? "" : ", ") + to_string(l);
  return out;
}

[[nodiscard]] std::string text_row(const remote_region_info& r) {
  const auto& g = r.region;
  std::string out =
      "region " + std::to_string(g.id) + " of generation " + std::to_string(g.generation) + ": " +
      std::to_string(g.bytes) + " bytes, label '" + detail::escape_control(g.label) + "', attach " +
      (g.attach == attach_flag::global ? "global" : "host") + ", refs " + std::to_string(g.refs) +
      ", pins " + std::to_string(g.pins) + ", age " + std::to_string(g.age_ms) + " ms";
  if (r.session == 0)
    return out + ", not leased (attributes not read)\n";
  out += ", session " + std::to_string(r.session);
  if (!r.attributes_known)
    return out + ", attributes unknown\n";
  const auto& a = r.attributes;
  return out + "\n    read_mostly " + (a.read_mostly ? "yes" : "no") + ", preferred " +
         (a.has_preferred_location ? to_string(a.preferred_location) : "none") + ", accessed_by " +
         locations_text(a.accessed_by) + ", last prefetch " +
         (a.has_last_prefetch_location ? to_string(a.last_prefetch_location) : "none") + "\n";
}

[[nodiscard]] boost::json::value json_location(bool has, const location& l) {
  if (!has)
    return nullptr;
  return boost::json::value(to_string(l));
}

[[nodiscard]] boost::json::object json_row(const remote_region_info& r) {
  const auto& g = r.region;
  boost::json::object row{{"id", g.id},
                          {"generation", g.generation},
                          {"bytes", g.bytes},
                          {"label", g.label},
                          {"attach", g.attach == attach_flag::global ? "global" : "host"},
                          {"refs", g.refs},
                          {"pins", g.pins},
                          {"age_ms", g.age_ms},
                          {"session", r.session}};
  if (!r.attributes_known) {
    row["attributes"] = nullptr;
    return row;
  }
  const auto& a = r.attributes;
  boost::json::array accessed;
  for (const auto& l : a.accessed_by)
    accessed.emplace_back(to_string(l));
  row["attributes"] = boost::json::object{
      {"read_mostly", a.read_mostly},
      {"preferred_location", json_location(a.has_preferred_location, a.preferred_location)},
      {"accessed_by", std::move(accessed)},
      {"last_prefetch_location",
       json_location(a.has_last_prefetch_location, a.last_prefetch_location)}};
  return row;
}

}  // namespace

int run_regions(const options& o) {
  const auto hardening = parse_hardening(o);
  remote_session session(o, hardening.tls);
  auto& server = session.server();
  // A tenant sees its own session's regions, which for this fresh session are none; the
  // operator's connection (its socket, or its certificate) sees every region.
  const auto rows = server.regions();
  if (o.format == output_format::json) {
    boost::json::array all;
    for (const auto& r : rows)
      all.emplace_back(json_row(r));
    std::cout << pretty_json(all, 1);  // one region per line
  } else {
    std::cout << "server " << server.address() << ": " << rows.size() << " region(s)\n";
    for (const auto& r : rows)
      std::cout << text_row(r);
  }
  std::cout.flush();
  return std::cout ? exit_ok : exit_failure;
}

}  // namespace uma::cli
