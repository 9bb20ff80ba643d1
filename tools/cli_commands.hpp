#pragma once

// The commands of the `uma` tool. Each returns the process exit status (tools/cli_options.hpp)
// and throws `uma::error` for runtime failures, which main() reports with exit status 1.

#include <chrono>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <uma/actors/remote/remote_client.hpp>
#include <uma/actors/scheduler_tuning.hpp>
#include <uma/messages/register_types.hpp>
#include "tools/cli_options.hpp"

namespace uma::cli {

/// An actor system configuration with uma's types registered and the scheduler tuned for
/// request/response traffic (actors/scheduler_tuning.hpp; `--caf.` options override it).
struct actor_config : caf::actor_system_config {
  actor_config() {
    register_types(*this);
    tune_scheduler(*this);
  }
};

/// Hands `o.caf_args` and a caf-application.ini in the working directory to
/// `caf::actor_system_config::parse`, as any CAF application does. `--caf.KEY=VALUE` is
/// CAF 0.18's spelling; Debian's CAF 0.17 reads it as `--caf#KEY=VALUE`. Returns CAF's
/// complaint, empty when it took everything (tools/caf_options.cpp).
[[nodiscard]] std::string apply_caf_options(caf::actor_system_config& cfg, const options& o);

/// `apply_caf_options`, throwing `uma::error` (invalid_argument) with CAF's complaint.
void configure(caf::actor_system_config& cfg, const options& o);

/// A session with the serving node at `--connect` (a Unix socket, or TCP with mutual TLS when
/// `tls` names the files), for the commands that query one. Throws what the remote_client's
/// constructor throws.
class remote_session {
 public:
  remote_session(const options& o, const tls_options& tls)
      : server_(o.connect_target,
                remote_client_options{.timeout = std::chrono::seconds(10), .tls = tls}) {}
  [[nodiscard]] remote_client& server() noexcept { return server_; }

 private:
  remote_client server_;
};

/// The project's version ("0.1.0"): what `uma --version` and the first line of `uma info` say.
[[nodiscard]] const char* version() noexcept;

/// `uma info`: backend, devices, versions, capability flags, memory-model verdicts.
[[nodiscard]] int run_info(const options& o);

/// `uma demo`: the worker pipeline, the allocator's stats, then a stop that leaves a clone inert.
[[nodiscard]] int run_demo(const options& o);

/// `uma stats`: a short workload, then the counters as text, JSON or Prometheus exposition;
/// with --connect, the counters of a serving node.
[[nodiscard]] int run_stats(const options& o);

/// `uma serve`: a supervised allocator behind the remote interface, on a Unix socket (and TCP
/// with mutual TLS when asked), until SIGINT/SIGTERM or --for.
[[nodiscard]] int run_serve(const options& o);

/// `uma regions --connect`: a serving node's region table as text or JSON.
[[nodiscard]] int run_regions(const options& o);

/// `uma snapshot`: a short workload on a fresh allocator (two regions left live), then its
/// snapshot as JSON and/or a self-contained HTML page; with --connect (and the operator key),
/// the snapshot of a serving node's allocator, each region with the session leasing it.
[[nodiscard]] int run_snapshot(const options& o);

/// `uma restart --connect`: the serving node's allocator restarted by its operator.
[[nodiscard]] int run_restart(const options& o);

/// `uma budgets --connect`: the report of a serving node's arbiter as text or JSON, after the
/// operator's --set-total / --set-policy when given.
[[nodiscard]] int run_budgets(const options& o);

}  // namespace uma::cli
