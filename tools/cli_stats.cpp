// `uma stats`: a short workload on an allocator, then its counters.

#include <iostream>
#include <vector>

#include <caf/actor_system.hpp>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/client.hpp>
#include <uma/actors/metrics/prometheus_text.hpp>
#include <uma/actors/remote/remote_client.hpp>
#include "tools/cli_commands.hpp"
#include "tools/cli_hardening.hpp"
#include "tools/stats_format.hpp"

namespace uma::cli {

namespace {

/// Exercises every counter family once: allocations, prefetch, advice, discard, a refused
/// request, releases. Leaves nothing allocated.
void run_workload(client& uma, location target) {
  std::vector<ManagedRef<float>> refs;
  for (const std::size_t floats : {1u << 12, 1u << 14, 1u << 16, 1u << 18}) {
    refs.push_back(uma.allocate<float>(floats, {.label = "stats workload"}));
    auto pin = refs.back().pin();
    std::fill(pin.begin(), pin.end(), 1.0f);
  }
  std::vector<byte_ref> all;
  for (const auto& r : refs)
    all.push_back(client::erase(r));
  static_cast<void>(uma.prefetch(all, {target}, {}, completion::complete));
  static_cast<void>(uma.advise({all[0], all[1]}, advice::set_read_mostly));
  static_cast<void>(uma.discard({all[2]}, {}, completion::complete));
  try {
    static_cast<void>(uma.allocate<float>(0, {.label = "refused on purpose"}));
  } catch (const error& e) {
    if (e.code() != errc::invalid_argument)
      throw;  // anything but the expected refusal is a real failure
  }
}

/// Prints `stats` in the chosen format; false when stdout failed.
bool print(const allocator_stats& stats, output_format format) {
  switch (format) {
    case output_format::json:
      std::cout << to_json(stats);
      break;
    case output_format::prometheus:
      std::cout << to_prometheus(stats);
      break;
    case output_format::text:
      std::cout << to_string(stats);
      break;
  }
  std::cout.flush();
  return static_cast<bool>(std::cout);
}

/// `uma stats --connect`: the serving node's counters. JSON and Prometheus print exactly what a
/// local allocator's would; text adds the supervisor's and the gateway's counters.
int run_remote_stats(const options& o) {
  remote_session session(o, parse_hardening(o).tls);
  auto& server = session.server();
  const auto stats = server.stats();
  if (o.format == output_format::text) {
    std::cout << "server: " << server.address() << ", supervisor " << to_string(stats.supervisor)
              << ", " << stats.restarts << " restart(s)\n"
              << "sessions: " << stats.sessions << " open (this one included), "
              << stats.sessions_lost << " lost; leases: " << stats.leases << " ("
              << stats.leased_bytes << " bytes)\n";
  }
  return print(printable(stats.allocator), o.format) ? exit_ok : exit_failure;
}

}  // namespace

int run_stats(const options& o) {
  if (o.connect)
    return run_remote_stats(o);
  const auto backend = make_backend(o.backend, o.host_devices);
  actor_config cfg;
  configure(cfg, o);
  caf::actor_system sys{cfg};
  client uma(sys, allocator_config{.backend = {.instance = backend}});
  if (o.workload) {
    run_workload(uma, backend->device_count() > 0 ? location::device(0) : location::host());
    // Its labelled blocks went back to cached slabs (those it advised once their advice was
    // reset, which the flush waits for): the slabs go back too.
    static_cast<void>(uma.flush());
    uma.trim();
  }
  return print(uma.flush(), o.format) ? exit_ok : exit_failure;
}

}  // namespace uma::cli
