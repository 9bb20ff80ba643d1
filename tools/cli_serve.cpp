// `uma serve`: a supervised allocator behind the remote interface, served over gRPC on a Unix
// socket (and TCP with mutual TLS when asked).

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/metrics/metrics_endpoint.hpp>
#include <uma/actors/remote/remote_gateway.hpp>
#include <uma/actors/remote/wire/wire_server.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include <uma/sys/log_limiter.hpp>
#include "tools/cli_arbiter_options.hpp"
#include "tools/cli_commands.hpp"
#include "tools/cli_hardening.hpp"

namespace uma::cli {

namespace {

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread and so in every thread started after it
/// (CAF's, gRPC's): they are then only ever taken by the sigtimedwait of the serving loop.
[[nodiscard]] sigset_t block_serve_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
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

/// The node's arbiter of --arbiter-* (null without --arbiter-total), its totals checked against
/// the backend; its decisions are logged. What the backend or the arbiter refuses goes to
/// `usage` instead (a usage error: nothing has started).
[[nodiscard]] std::shared_ptr<arbiter> start_arbiter(const options& o, const backend& b,
                                                     std::string& usage) {
  try {
    if (auto complaint = arbiter_totals_complaint(o, b); !complaint.empty())
      raise(errc::invalid_argument, complaint);
    // At most 100 lines a second: a member that changes its demand in a loop makes a decision a
    // call (issue 35's log flood); each decision stays in the ledger `uma budgets` prints.
    // Static: the arbiter's threads may log until it is gone.
    static log_limiter decisions_log(log_line, 100);
    auto node_arbiter = make_node_arbiter(o, decisions_log.as_sink());
    for (const auto& [device, bytes] : o.arbiter_totals)
      log_line("arbiter: device " + std::to_string(device) + ": " + std::to_string(bytes) +
               " bytes to divide, " + std::to_string(o.arbiter_deadline.count()) + " ms to evict");
    return node_arbiter;
  } catch (const error& e) {
    if (e.code() != errc::invalid_argument)
      throw;
    usage = e.what();
    return nullptr;
  }
}

/// The Prometheus endpoint of --metrics (null without it), announced on stdout. It serves no
/// `/snapshot`: a snapshot shows every tenant's regions and is the operator's (through the
/// operator socket), and this endpoint authenticates nobody. Off loopback it needs
/// --insecure-metrics.
[[nodiscard]] std::unique_ptr<metrics_endpoint> start_metrics(
    const wire_server& wire, const std::shared_ptr<arbiter>& node_arbiter, caf::actor_system& sys,
    const allocator_supervisor_actor& supervisor, const options& o, const hardening_options& h) {
  if (!o.metrics)
    return nullptr;
  const auto& [host, port] = *o.metrics;
  if (!is_loopback_address(host) && !h.insecure_metrics)
    raise(errc::invalid_argument,
          "refusing to serve metrics on " + host +
              ", which is not a loopback address: the endpoint is plain HTTP without "
              "authentication; bind it to loopback (a TLS proxy in front for remote scrapers) "
              "or give --insecure-metrics");
  if (!is_loopback_address(host))
    log_line("WARNING: the metrics endpoint listens on " + host +
             " (--insecure-metrics): whoever reaches it reads the allocator's counters.");
  auto endpoint = std::make_unique<metrics_endpoint>(
      sys, supervisor,
      metrics_endpoint_config{.address = host,
                              .port = port,
                              .labels = o.metrics_labels,
                              .bearer_token = h.metrics_token,
                              .extra_families = [&wire, node_arbiter] {
                                auto text = wire.prometheus_text();
                                if (node_arbiter)
                                  text += node_arbiter->prometheus_text();
                                return text;
                              }});
  std::printf("uma serve: metrics on http://%s/metrics\n",
              endpoint_text(host, endpoint->port()).c_str());
  std::fflush(stdout);
  return endpoint;
}

/// The gateway's settings from the command line: the quota ceiling, the tenant limits (a
/// quarter of the ceiling per tenant unless --tenant-quota says otherwise), the operator key
/// (drawn here; it never leaves the process: the wire adds it to the operator's requests).
[[nodiscard]] gateway_config make_gateway_config(const options& o, const hardening_options& h,
                                                 const backend& b) {
  gateway_config g;
  // At most 20 lines a second: an open-and-cancel flood of sessions writes two lines a session
  // (issue 35: 7.8 MB in 20 s). Static: the gateway may log until the process ends.
  static log_limiter session_log(log_line, 20);
  g.log = session_log.as_sink();
  g.operator_secret = make_operator_key();
  g.quota_ceiling = o.quota_bytes != 0 ? o.quota_bytes : b.default_quota();
  g.tenant_quota_bytes = h.tenant_quota_bytes != 0
                             ? h.tenant_quota_bytes
                             : std::max<std::uint64_t>(g.quota_ceiling / 4, 1);
  g.idle_timeout = h.idle_timeout;
  return g;
}

/// The folder of the default socket path: made if missing, and used only when it is a directory
/// of this user that nobody else may write to (/tmp is shared: another user could have made
/// /tmp/uma-UID first and swap the socket inside). Searchable by the group for mode 0660.
void make_socket_folder(const std::string& path, unsigned socket_mode) {
  const auto folder = path.substr(0, path.rfind('/'));
  const mode_t mode = socket_mode == 0660 ? 0750 : 0700;
  ::mkdir(folder.c_str(), mode);
  struct stat st {};
  if (::lstat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 022) != 0)
    raise(errc::invalid_argument,
          "the socket folder " + folder +
              " is not a directory of this user that only it may write to: remove it, or name "
              "another socket with --socket");
  ::chmod(folder.c_str(), mode);
}

/// The wire server: the tenants' and the operator's Unix sockets, and TCP with mutual TLS when
/// --port is given; the node's arbiter on them when there is one. Announces each listener on
/// stdout.
[[nodiscard]] std::unique_ptr<wire_server> start_wire(caf::actor_system& sys,
                                                      const remote_allocator_actor& gateway,
                                                      const options& o, const hardening_options& h,
                                                      const gateway_config& g, const backend& b,
                                                      std::shared_ptr<arbiter> node_arbiter) {
  wire_server_config w;
  w.socket_path = o.socket_path.empty() ? default_socket_path() : o.socket_path;
  if (o.socket_path.empty())
    make_socket_folder(w.socket_path, o.socket_mode);
  w.socket_mode = static_cast<mode_t>(o.socket_mode);
  w.operator_socket_path =
      o.operator_socket_path.empty() ? w.socket_path + ".operator" : o.operator_socket_path;
  w.tcp = o.port.has_value();
  w.tcp_bind = o.bind;
  w.tcp_port = o.port.value_or(0);
  w.tls = h.tls;
  w.operator_names = h.operator_names;
  w.operator_secret = g.operator_secret;
  w.limits.idle_timeout = h.idle_timeout.count() == 0 ? std::chrono::hours(24 * 365)
                                                      : std::chrono::milliseconds(h.idle_timeout);
  w.limits.max_connections_per_identity = h.max_connections_per_identity;
  w.limits.max_connections_per_address = h.max_connections_per_address;
  w.arbiter = std::move(node_arbiter);
  w.log = log_line;
  auto server = std::make_unique<wire_server>(sys, gateway, w);
  const auto backend_text =
      "(backend " + std::string(to_string(b.kind())) + ", pid " + std::to_string(getpid()) + ")";
  std::printf("uma serve: listening on unix:%s %s\n", w.socket_path.c_str(), backend_text.c_str());
  std::printf("uma serve: operator socket unix:%s\n", w.operator_socket_path.c_str());
  if (w.tcp)
    std::printf("uma serve: listening on %s with mutual TLS\n",
                endpoint_text(o.bind, server->tcp_port()).c_str());
  std::fflush(stdout);
  return server;
}

/// SIGHUP: the TLS files are read and checked again; new TLS connections use them when they
/// pass, and nothing changes when they do not (the old set stays in force). Logged either way.
void reload_tls(wire_server& wire, const hardening_options& h) {
  if (wire.tcp_port() == 0) {
    log_line("SIGHUP: no TCP listener, no TLS files to reload");
    return;
  }
  try {
    wire.reload_tls();
    log_line("SIGHUP: reloaded the TLS files (" + h.tls.certificate + ", " + h.tls.key + ", " +
             h.tls.ca_file + "); new connections use them");
  } catch (const error& e) {
    log_line(std::string("SIGHUP: refused to reload the TLS files: ") + e.what() +
             "; the previous ones stay in force");
  }
}

/// Serves until a stop signal, the --for deadline, or the supervisor or the gateway going down
/// (then `failed`); SIGHUP calls `on_hangup`. Asks the gateway for its stats once a second,
/// which also ends idle sessions.
[[nodiscard]] std::string serve_until_stopped(const options& o, caf::actor_system& sys,
                                              caf::scoped_actor& self,
                                              const remote_allocator_actor& gateway,
                                              const sigset_t& signals,
                                              const std::function<void()>& on_hangup,
                                              bool& failed) {
  const auto start = std::chrono::steady_clock::now();
  auto next_tick = start;
  std::string why;
  while (why.empty()) {
    timespec tick{0, 100'000'000};
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    const auto now = std::chrono::steady_clock::now();
    if (sig == SIGINT || sig == SIGTERM)
      return sig == SIGINT ? "SIGINT" : "SIGTERM";
    if (sig == SIGHUP)
      on_hangup();
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
  const sigset_t signals = block_serve_signals();
  const auto hardening = parse_hardening(o);
  const auto backend = serve_backend(o);
  if (const auto warning = check_bind_policy(o, hardening); !warning.empty())
    log_line("WARNING: " + warning);
  std::string usage_error;
  const auto node_arbiter = start_arbiter(o, *backend, usage_error);
  if (!usage_error.empty()) {
    std::fprintf(stderr, "uma serve: %s\nrun 'uma serve --help' for usage\n", usage_error.c_str());
    return exit_usage;
  }

  actor_config cfg;
  configure(cfg, o);
  caf::actor_system sys{cfg};
  supervisor_config supervision;
  supervision.allocator.backend.instance = backend;
  supervision.allocator.memory.quota_bytes = o.quota_bytes;
  const auto supervisor = spawn_supervisor(sys, supervision);
  const auto gw_config = make_gateway_config(o, hardening, *backend);
  const auto gateway = spawn_remote_gateway(sys, supervisor, gw_config);
  caf::scoped_actor self{sys};
  self->monitor(supervisor);
  self->monitor(gateway);
  auto stop = [&] {
    self->send_exit(gateway, caf::exit_reason::user_shutdown);  // releases every lease
    self->send_exit(supervisor, caf::exit_reason::user_shutdown);
  };

  std::unique_ptr<wire_server> wire;
  std::unique_ptr<metrics_endpoint> metrics;
  try {
    wire = start_wire(sys, gateway, o, hardening, gw_config, *backend, node_arbiter);
    metrics = start_metrics(*wire, node_arbiter, sys, supervisor, o, hardening);
  } catch (...) {
    stop();
    throw;
  }

  bool failed = false;
  const auto why = serve_until_stopped(
      o, sys, self, gateway, signals, [&] { reload_tls(*wire, hardening); }, failed);
  if (failed)
    log_line("stopping: " + why);
  else
    log_final_stats(self, sys, gateway, why);
  self->demonitor(gateway.address());
  metrics.reset();  // scrapes end before the allocator does
  wire.reset();     // every session stream ends; the gateway still answers what is in flight
  stop();
  if (!failed)
    self->receive([](const caf::down_msg&) {},
                  caf::after(std::chrono::seconds(30)) >>
                      [] { log_line("the allocator did not stop within 30 s"); });
  return failed ? exit_failure : exit_ok;
}

}  // namespace uma::cli
