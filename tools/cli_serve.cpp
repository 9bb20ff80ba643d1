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
#include <uma/actors/metrics_endpoint.hpp>
#include <uma/actors/remote_gateway.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include "tools/cli_commands.hpp"

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
      metrics_endpoint_config{.address = host, .port = port, .labels = o.metrics_labels});
  std::printf("uma serve: metrics on http://%s/metrics\n",
              endpoint_text(host, endpoint->port()).c_str());
  std::fflush(stdout);
  return endpoint;
}

/// Serves until a stop signal, the --for deadline, or the supervisor going down; says which.
/// `failed`: the supervisor went down.
[[nodiscard]] std::string wait_for_stop(caf::actor_system& sys, caf::scoped_actor& self,
                                        const sigset_t& stop_signals, const options& o,
                                        bool& failed) {
  const auto start = std::chrono::steady_clock::now();
  std::string why;
  while (why.empty()) {
    timespec tick{0, 100'000'000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      why = sig == SIGINT ? "SIGINT" : "SIGTERM";
    } else if (o.serve_seconds != 0 &&
               std::chrono::steady_clock::now() - start >= std::chrono::seconds(o.serve_seconds)) {
      why = "--for " + std::to_string(o.serve_seconds) + " s";
    } else {
      self->receive(
          [&](caf::down_msg& dm) {
            why = "the allocator supervisor went down: " +
                  (dm.reason ? sys.render(dm.reason) : std::string("normal exit"));
            failed = true;
          },
          caf::after(std::chrono::seconds(0)) >> [] {});
    }
  }
  return why;
}

/// Says why the server stops and what the gateway still holds.
void log_stopping(caf::actor_system& sys, caf::scoped_actor& self,
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

}  // namespace

int run_serve(const options& o) {
  const sigset_t stop_signals = block_stop_signals();
  std::shared_ptr<backend> backend = make_backend(o.backend);
  if (!o.faults.empty()) {
    auto faults = std::make_shared<fault_injecting_backend>(backend);
    for (const auto& f : o.faults)
      faults->inject(f);
    backend = faults;
  }
  if (!is_loopback_address(o.bind))
    log_line("WARNING: listening on " + o.bind +
             ", which is not a loopback address. CAF's middleman authenticates nobody: whoever "
             "reaches this port can allocate, prefetch, advise, discard and release memory "
             "here. Use a trusted network only (docs/distributed.md).");

  remote_actor_config cfg;
  configure(cfg, o);
  caf::actor_system sys{cfg};
  supervisor_config supervision;
  supervision.allocator.backend = backend;
  supervision.allocator.quota_bytes = o.quota_bytes;
  const auto supervisor = spawn_supervisor(sys, supervision);
  const auto gateway = spawn_remote_gateway(sys, supervisor, {.log = log_line});
  caf::scoped_actor self{sys};
  self->monitor(supervisor);
  auto stop = [&] {
    self->send_exit(gateway, caf::exit_reason::user_shutdown);  // releases every lease
    self->send_exit(supervisor, caf::exit_reason::user_shutdown);
  };

  std::unique_ptr<metrics_endpoint> metrics;
  try {
    const auto port = publish_gateway(sys, gateway, *o.port, o.bind);
    std::printf("uma serve: listening on %s (backend %s, pid %d)\n",
                endpoint_text(o.bind, port).c_str(),
                std::string(to_string(backend->kind())).c_str(), static_cast<int>(getpid()));
    std::fflush(stdout);
    metrics = start_metrics(sys, supervisor, o);
  } catch (...) {
    stop();
    throw;
  }

  bool failed = false;
  const std::string why = wait_for_stop(sys, self, stop_signals, o, failed);
  if (!failed)
    log_stopping(sys, self, gateway, why);
  else
    log_line("stopping: " + why);
  metrics.reset();  // scrapes end before the allocator does
  stop();
  if (!failed)
    self->receive([](const caf::down_msg&) {},
                  caf::after(std::chrono::seconds(30)) >>
                      [] { log_line("the allocator did not stop within 30 s"); });
  return failed ? exit_failure : exit_ok;
}

}  // namespace uma::cli
