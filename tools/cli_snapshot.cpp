// `uma snapshot`: a short workload on a fresh allocator, or a serving node's allocator
// (--connect: its operator socket), then the snapshot as JSON and/or a self-contained HTML page.

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <string_view>
#include <vector>

#include <caf/actor_system.hpp>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/client.hpp>
#include <uma/actors/remote/arbiter/arbiter_client.hpp>
#include <uma/actors/remote/remote_client.hpp>
#include "tools/arbiter_json.hpp"
#include "tools/cli_commands.hpp"
#include "tools/cli_hardening.hpp"
#include "tools/json_print.hpp"
#include "tools/snapshot_json.hpp"
#include "tools/snapshot_page.hpp"

namespace uma::cli {

namespace {

/// The workload of `uma stats` with two regions kept live ("weights", prefetched and advised
/// read-mostly; "activations") and short-lived scratch regions around them, so that the history
/// shows every kind a local allocator records. Returns the live refs.
std::vector<ManagedRef<float>> run_workload(client& uma, location target) {
  std::vector<ManagedRef<float>> live;
  live.push_back(uma.allocate<float>(1u << 18, {.label = "weights"}));
  for (int round = 0; round < 4; ++round) {
    auto scratch = uma.allocate<float>(std::size_t{1} << (14 + round), {.label = "scratch"});
    auto pin = scratch.pin();
    std::fill(pin.begin(), pin.end(), 1.0f);
    if (round == 1)
      live.push_back(uma.allocate<float>(1u << 16, {.label = "activations"}));
  }
  std::vector<byte_ref> all;
  for (const auto& r : live)
    all.push_back(client::erase(r));
  static_cast<void>(uma.prefetch(all, {target}, {}, completion::complete));
  static_cast<void>(uma.advise({all[0]}, advice::set_read_mostly));
  static_cast<void>(uma.discard({all[1]}, {}, completion::complete));
  static_cast<void>(uma.flush());  // the scratch regions' frees have run
  return live;
}

/// Writes `text` to `path` ("-": stdout); throws invalid_argument naming the file and why.
void write_file(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text << std::flush;
    if (!std::cout)
      raise(errc::invalid_argument, "could not write the snapshot to stdout");
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out)
    out << text;
  out.close();
  if (!out)
    raise(errc::invalid_argument,
          std::string("could not write '").append(path).append("': ").append(std::strerror(errno)));
}

/// Writes the forms asked for: JSON (to stdout when neither was named) and the page.
int write_forms(const options& o, const boost::json::object& data) {
  if (!o.snapshot_json.empty() || o.snapshot_html.empty())
    write_file(o.snapshot_json.empty() ? "-" : o.snapshot_json, pretty_json(data, 2));
  if (!o.snapshot_html.empty())
    write_file(o.snapshot_html, snapshot_page(data));
  return exit_ok;
}

int stopped(const error& e) {
  std::fprintf(stderr, "uma snapshot: the allocator is stopped (%s)\n", e.what());
  return exit_failure;
}

int run_local(const options& o) {
  const auto backend = make_backend(o.backend, o.host_devices);
  actor_config cfg;
  configure(cfg, o);
  caf::actor_system sys{cfg};
  client uma(sys, allocator_config{.backend = {.instance = backend}});
  std::vector<ManagedRef<float>> live;
  if (o.workload)
    live = run_workload(uma, backend->device_count() > 0 ? location::device(0) : location::host());
  allocator_snapshot snap;
  try {
    snap = uma.snapshot();
  } catch (const error& e) {
    if (e.code() != errc::allocator_stopped)
      throw;
    return stopped(e);
  }
  return write_forms(o, to_json_object(snap));
}

/// The report of the arbiter of the node at --connect (over the same target and TLS files), or
/// nothing when the node has no arbiter; any other failure is thrown.
std::optional<arbiter_report> arbiter_of(const options& o, const tls_options& tls) {
  try {
    const arbiter_client arbiter(
        o.connect_target, remote_client_options{.timeout = std::chrono::seconds(10), .tls = tls});
    return arbiter.report();
  } catch (const error& e) {
    if (e.code() == errc::not_supported)  // a node without an arbiter
      return std::nullopt;
    throw;
  }
}

/// The snapshot of the allocator a `uma serve` runs at --connect: the local form plus "server",
/// each region's "session" (0: not leased through the gateway) and, when the node has an
/// arbiter, "arbiter": its report as `uma budgets --json` prints it, without "server".
int run_remote(const options& o) {
  const auto hardening = parse_hardening(o);
  remote_session session(o, hardening.tls);
  auto& server = session.server();
  remote_snapshot snap;
  try {
    snap = server.snapshot();
  } catch (const error& e) {
    if (e.code() != errc::allocator_stopped)
      throw;
    return stopped(e);
  }
  auto data = to_json_object(to_local(snap));
  data["server"] = server.address();
  auto& rows = data["regions"].as_array();
  for (std::size_t i = 0; i < rows.size(); ++i)
    rows[i].as_object()["session"] = snap.regions[i].session;
  if (const auto report = arbiter_of(o, hardening.tls))
    data["arbiter"] = to_json_object(printable(*report));
  return write_forms(o, data);
}

}  // namespace

int run_snapshot(const options& o) {
  return o.connect ? run_remote(o) : run_local(o);
}

}  // namespace uma::cli
