// `uma serve`: a supervised allocator behind the remote interface, published on a port.

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/basp_front.hpp>
#include <uma/actors/metrics_endpoint.hpp>
#include <uma/actors/remote_gateway.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include "tools/cli_commands.hpp"
#include "tools/cli_hardening.hpp"
#include "tools/snapshot_json.hpp"

namespace uma::cli {

namespace {

/// Blocks SIGINT and SIGTERM in this thread and so in every thread started after it (CAF's):
/// they are then only ever taken by the sigtimedwait of the serving loop.
[[nodiscard]] sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

[[nodiscard]] std::string endpoint_text(const std::string& address, std::uint16_t port) {
  const bool v6 = address.find(':') != std::string::npos;
  return (v6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

void log_line(const std::string& line) {
  std::fprintf(stderr, "uma serve: %s\n", line.c_str());
}

/// The Prometheus endpoint of --metrics (null without it), announced on stdout.
[[nodiscard]] std::unique_ptr<metrics_endpoint> start_metrics(
    caf::actor_system& sys, const allocator_supervisor_actor& supervisor, const options& o) {
  if (!o.metrics)
    return nullptr;
  const auto& [host, port] = *o.metrics;
  if (!is_loopback_address(host))
    log_line("WARNING: the metrics endpoint listens on " + host +
             ", which is not a loopback address: whoever reaches it reads the allocator's "
             "counters and labels (read-only, no authentication).");
  auto endpoint = std::make_unique<metrics_endpoint>(
      sys, supervisor,
      metrics_endpoint_config{
          .address = host,
          .port = port,
          .labels = o.metrics_labels,
          .snapshot_json = [](const allocator_snapshot& snap) { return to_json(snap); }});
  std::printf("uma serve: metrics on http://%s/metrics\n",
              endpoint_text(host, endpoint->port()).c_str());
  std::fflush(stdout);
  return endpoint;
}

/// The gateway's settings from the command line: the quota ceiling, the tenant limits, the
/// operator key (written to --operator-key-file, or drawn and kept in memory only).
[[nodiscard]] gateway_config make_gateway_config(const options& o, const hardening_options& h,
                                                 const backend& b) {
  gateway_config g;
  g.log = log_line;
  g.operator_secret = make_operator_key();
  if (!h.operator_key_file.empty())
    write_operator_key(h.operator_key_file, g.operator_secret);
  g.quota_ceiling = o.quota_bytes != 0 ? o.quota_bytes : b.default_quota();
  g.tenant_quota_bytes = h.tenant_quota_bytes;
  g.idle_timeout = h.idle_timeout;
  return g;
}

/// The middleman listens on a loopback port only the front connects to; peers reach the front
/// (docs/distributed.md: CAF 0.17 cannot cap a BASP payload before allocating it). Announces
/// the public address on stdout.
[[nodiscard]] std::unique_ptr<basp_front> start_front(caf::actor_system& sys,
                                                      const remote_allocator_actor& gateway,
                                                      const options& o, const hardening_options& h,
                                                      const backend& b) {
  const auto internal = publish_gateway(sys, gateway, 0, "127.0.0.1");
  auto front = std::make_unique<basp_front>(o.bind, *o.port, internal,
                                            basp_front_config{.max_payload = h.max_payload,
                                                              .idle_timeout = h.idle_timeout,
                                                              .parse_basp = !h.tls.enabled(),
                                                              .log = log_line});
  std::printf("uma serve: listening on %s (backend %s, pid %d)\n",
              endpoint_text(o.bind, front->port()).c_str(),
              std::string(to_string(b.kind())).c_str(), static_cast<int>(getpid()));
  std::fflush(stdout);
  return front;
}

/// Serves until a stop signal, the --for deadline, or the supervisor or the gateway going down
/// (then `failed`). Asks the gateway for its stats once a second, which also ends idle sessions.
[[nodiscard]] std::string serve_until_stopped(const options& o, caf::actor_system& sys,
                                              caf::scoped_actor& self,
                                              const remote_allocator_actor& gateway,
                                              const sigset_t& stop_signals, bool& failed) {
  const auto start = std::chrono::steady_clock::now();
  auto next_tick = start;
  std::string why;
  while (why.empty()) {
    timespec tick{0, 100'000'000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    const auto now = std::chrono::steady_clock::now();
    if (sig == SIGINT || sig == SIGTERM)
      return sig == SIGINT ? "SIGINT" : "SIGTERM";
    if (o.serve_seconds != 0 && now - start >= std::chrono::seconds(o.serve_seconds))
      return "--for " + std::to_string(o.serve_seconds) + " s";
    if (now >= next_tick) {
      caf::anon_send(gateway, stats_atom_v);
      next_tick = now + std::chrono::seconds(1);
    }
    self->receive(
        [&](caf::down_msg& dm) {
          const bool gw = dm.source == gateway.address();
          why = std::string(gw ? "the remote gateway" : "the allocator supervisor") +
                " went down: " + (dm.reason ? sys.render(dm.reason) : std::string("normal exit"));
          failed = true;
        },
        caf::after(std::chrono::seconds(0)) >> [] {});
  }
  return why;
}

void log_final_stats(caf::scoped_actor& self, caf::actor_system& sys,
                     const remote_allocator_actor& gateway, const std::string& why) {
  self->request(gateway, std::chrono::seconds(5), stats_atom_v)
      .receive(
          [&](const remote_stats& s) {
            log_line("stopping after " + why + ": " + std::to_string(s.sessions) +
                     " session(s) open, " + std::to_string(s.sessions_lost) + " lost, " +
                     std::to_string(s.leases) + " lease(s) to release, live bytes " +
                     std::to_string(s.allocator.live_bytes));
          },
          [&](const caf::error& e) {
            log_line("stopping after " + why + " (" + sys.render(e) + ")");
          });
}

/// The backend of `uma serve`, with the --inject-fault decorator when faults were asked for.
[[nodiscard]] std::shared_ptr<backend> serve_backend(const options& o) {
  std::shared_ptr<backend> b = make_backend(o.backend, o.host_devices);
  if (o.faults.empty())
    return b;
  auto faults = std::make_shared<fault_injecting_backend>(b);
  for (const auto& f : o.faults)
    faults->inject(f);
  return faults;
}

}  // namespace

int run_serve(const options& o) {
  const sigset_t stop_signals = block_stop_signals();
  const auto hardening = parse_hardening(o);
  const auto backend = serve_backend(o);
  if (const auto warning = check_bind_policy(o.bind, hardening); !warning.empty())
    log_line(warning);

  remote_actor_config cfg{hardening.tls};
  configure(cfg, o);
  caf::actor_system sys{cfg};
  supervisor_config supervision;
  supervision.allocator.backend = backend;
  supervision.allocator.quota_bytes = o.quota_bytes;
  const auto supervisor = spawn_supervisor(sys, supervision);
  const auto gateway =
      spawn_remote_gateway(sys, supervisor, make_gateway_config(o, hardening, *backend));
  caf::scoped_actor self{sys};
  self->monitor(supervisor);
  self->monitor(gateway);
  auto stop = [&] {
    self->send_exit(gateway, caf::exit_reason::user_shutdown);  // releases every lease
    self->send_exit(supervisor, caf::exit_reason::user_shutdown);
  };

  std::unique_ptr<basp_front> front;
  std::unique_ptr<metrics_endpoint> metrics;
  try {
    front = start_front(sys, gateway, o, hardening, *backend);
    metrics = start_metrics(sys, supervisor, o);
  } catch (...) {
    stop();
    throw;
  }

  bool failed = false;
  const auto why = serve_until_stopped(o, sys, self, gateway, stop_signals, failed);
  if (failed)
    log_line("stopping: " + why);
  else
    log_final_stats(self, sys, gateway, why);
  self->demonitor(gateway.address());
  metrics.reset();  // scrapes end before the allocator does
  stop();
  if (!failed)
    self->receive([](const caf::down_msg&) {},
                  caf::after(std::chrono::seconds(30)) >>
                      [] { log_line("the allocator did not stop within 30 s"); });
  return failed ? exit_failure : exit_ok;
}

}  // namespace uma::cli
