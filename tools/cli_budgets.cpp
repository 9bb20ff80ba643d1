// `uma budgets --connect unix:PATH|HOST:PORT`: the report of a serving node's arbiter (devices,
// members, decisions), after the operator's --set-total / --set-policy when given.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>

#include <boost/json/object.hpp>

#include <uma/actors/remote/arbiter/arbiter_client.hpp>
#include <uma/actors/remote/detail/remote_checks.hpp>
#include <uma/sys/error.hpp>
#include "tools/arbiter_json.hpp"
#include "tools/cli_commands.hpp"
#include "tools/cli_hardening.hpp"
#include "tools/json_print.hpp"

namespace uma::cli {

namespace {

/// Decisions the text form shows (the newest); --json shows every one the server sent.
constexpr std::size_t text_decisions = 20;

[[nodiscard]] std::string who(std::uint64_t member, const std::string& tenant) {
  if (member == 0)
    return tenant.empty() ? std::string("the operator") : "tenant '" + tenant + "'";
  return "member " + std::to_string(member) + " (" + tenant + ")";
}

[[nodiscard]] std::string member_row(const arbiter_member_row& m) {
  const auto& c = m.claim;
  return "  " + who(m.member, m.tenant) + ": " + m.state + ", granted " +
         std::to_string(m.granted_bytes) + ", held " + std::to_string(m.held_bytes) +
         ", resident " + std::to_string(m.resident_bytes) + "; min " + std::to_string(c.min_bytes) +
         ", wanted " + std::to_string(c.wanted_bytes) + ", priority " + std::to_string(c.priority) +
         ", weight " + std::to_string(c.weight) + "; " + std::to_string(m.shrinks) +
         " shrink(s), slowest " + std::to_string(m.slowest_shrink.count()) + " ms\n";
}

[[nodiscard]] std::string text_report(const std::string& server, const arbiter_report& r) {
  std::string out = "server " + server + ": arbiter of " + std::to_string(r.devices.size()) +
                    " device(s), " + std::to_string(r.members) + " member(s), " +
                    std::to_string(r.revocations) + " revocation(s)\n";
  for (const auto& d : r.devices) {
    out += "device " + std::to_string(d.device) + ": " + std::to_string(d.total_bytes) +
           " bytes shared, " + std::to_string(d.held_bytes) + " held, " +
           std::to_string(d.members.size()) + " member(s)\n";
    for (const auto& m : d.members)
      out += member_row(m);
  }
  const auto shown = std::min(r.decisions.size(), text_decisions);
  out += "decisions: the last " + std::to_string(shown) + " of " +
         std::to_string(r.decisions.size()) + " kept\n";
  for (auto i = r.decisions.size() - shown; i < r.decisions.size(); ++i) {
    const auto& d = r.decisions[i];
    out += "  at " + std::to_string(d.at.count()) + " ms, " + who(d.member, d.tenant) +
           ", device " + std::to_string(d.device) + ": ";
    if (d.from_bytes != d.to_bytes)  // a policy changes no bytes by itself
      out += std::to_string(d.from_bytes) + " -> " + std::to_string(d.to_bytes) + " bytes: ";
    out += d.why + "\n";
  }
  return out;
}

/// The report as JSON (tools/arbiter_json.hpp) after "server", the address it came from.
[[nodiscard]] boost::json::object json_report(const std::string& server, const arbiter_report& r) {
  boost::json::object out{{"server", server}};
  for (auto& field : to_json_object(r))
    out.emplace(field.key(), std::move(field.value()));
  return out;
}

/// The operator's settings of `o` (a total first: a policy's minimum must fit it), then the
/// report; the report alone without them.
[[nodiscard]] arbiter_report settle(arbiter_client& arbiter, const options& o) {
  if (!o.set_total && !o.set_policy)
    return arbiter.report();
  arbiter_report r;
  if (o.set_total)
    r = arbiter.set_total(o.set_total->first, o.set_total->second);
  if (o.set_policy)
    r = arbiter.set_policy(o.set_policy->tenant, o.set_policy->device, o.set_policy->policy);
  return r;
}

}  // namespace

int run_budgets(const options& o) {
  const auto hardening = parse_hardening(o);
  arbiter_report report;
  try {
    arbiter_client arbiter(
        o.connect_target,
        remote_client_options{.timeout = std::chrono::seconds(10), .tls = hardening.tls});
    report = printable(settle(arbiter, o));
  } catch (const error& e) {
    // The server's refusal is its text: escaped before it reaches the terminal.
    std::fprintf(stderr, "uma: %s: %s\n", std::string(to_string(e.code())).c_str(),
                 detail::escape_control(e.what()).c_str());
    return exit_failure;
  }
  const auto server = detail::escape_control(o.connect_target);
  if (o.format == output_format::json)
    std::cout << pretty_json(json_report(server, report), SIZE_MAX, true);
  else
    std::cout << text_report(server, report);
  std::cout.flush();
  return std::cout ? exit_ok : exit_failure;
}

}  // namespace uma::cli
