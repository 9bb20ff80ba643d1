#pragma once

// Command-line parsing of the `uma` tool (CLI11): which command, which options, and the usage
// texts CLI11 generates from them. Pure functions over the argument list, so tests can check
// what is accepted and refused.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <uma/actors/remote/arbiter/arbiter_types.hpp>
#include <uma/sys/backend.hpp>
#include <uma/sys/fault_injecting_backend.hpp>

namespace uma::cli {

/// The tool's commands.
enum class command : std::uint8_t {
  help,
  info,
  demo,
  stats,
  serve,
  regions,
  snapshot,
  restart,
  budgets
};

/// How `uma stats` prints the counters.
enum class output_format : std::uint8_t { text, json, prometheus };

/// Exit status of the tool.
enum exit_status : int {
  exit_ok = 0,       ///< done
  exit_failure = 1,  ///< a runtime failure: a request failed, a check failed, no device
  exit_usage = 2,    ///< the command line is wrong
};

/// `--arbiter-policy` / `--set-policy TENANT:DEVICE:MIN_BYTES:PRIORITY:WEIGHT`: what the
/// operator allows a tenant ("uid 1000/infer") on a device.
struct tenant_policy {
  std::string tenant;
  int device = 0;
  arbiter_policy policy{};
};

/// A parsed command line.
struct options {
  command what = command::help;
  /// `uma <command> --help` or `uma help <command>`: print that command's usage.
  bool help = false;
  /// `uma --version`: print the project's version (no command goes with it).
  bool version = false;
  backend_choice backend = backend_choice::automatic;
  /// `--host-devices N[:BYTES]`: the devices a host backend emulates (sys/backend.hpp).
  emulated_devices host_devices{};
  // stats
  output_format format = output_format::text;
  bool workload = true;  ///< `--workload short` (default) or `none`
  // snapshot: where to write (empty: not that form; "-": stdout)
  std::string snapshot_json{};
  std::string snapshot_html{};
  // demo (the worker pipeline's shape)
  std::size_t producers = 2;
  std::size_t consumers = 2;
  std::size_t batches = 8;
  std::size_t floats = std::size_t{1} << 16;
  std::vector<fault> faults;   ///< `demo --inject-fault`, `serve --inject-fault`, in order
  bool backend_given = false;  ///< --backend or --host-devices appeared (not with --connect)
  bool workload_given = false;
  // stats, regions, snapshot: query a serving node (`uma serve`) instead of a local allocator
  bool connect = false;
  std::string connect_target{};  ///< "unix:PATH" or "HOST:PORT" (gRPC's target form)
  std::string connect_host{};    ///< of a TCP target
  std::uint16_t connect_port = 0;
  // serve
  std::string socket_path{};            ///< --socket; empty: the default (default_socket_path)
  unsigned socket_mode = 0600;          ///< --socket-mode: 0600 or 0660
  std::string operator_socket_path{};   ///< --operator-socket; empty: SOCKET.operator
  std::optional<std::uint16_t> port{};  ///< TCP with mutual TLS; 0 takes a free port
  std::string bind = "127.0.0.1";       ///< loopback unless --bind says otherwise
  bool bind_given = false;
  std::uint64_t serve_seconds = 0;  ///< --for: stop after this long; 0: at SIGINT/SIGTERM
  std::uint64_t quota_bytes = 0;    ///< --quota; 0: the backend's default
  /// serve --metrics HOST:PORT: the Prometheus scrape endpoint (port 0 takes a free one)
  std::optional<std::pair<std::string, std::uint16_t>> metrics{};
  bool metrics_labels = false;  ///< serve --metrics-labels: the per-label families too
  /// serve --arbiter-total DEVICE:BYTES: each device's bytes the node's arbiter divides (none:
  /// no arbiter). Checked against the backend's devices when serve starts.
  std::map<int, std::uint64_t> arbiter_totals{};
  std::vector<tenant_policy> arbiter_policies{};       ///< serve --arbiter-policy, in order
  std::chrono::milliseconds arbiter_deadline{10'000};  ///< serve --arbiter-deadline MS
  bool arbiter_deadline_given = false;
  // budgets: the operator's settings, sent before the report is printed
  std::optional<std::pair<int, std::uint64_t>> set_total{};  ///< --set-total DEVICE:BYTES
  std::optional<tenant_policy> set_policy{};                 ///< --set-policy SPEC
  /// `--caf.KEY=VALUE` options, in order, for CAF's actor_system_config::parse (the commands
  /// that run an actor system: demo, stats, serve, regions, snapshot).
  std::vector<std::string> caf_args{};
  /// serve/regions/snapshot hardening flags in order (name, value); tools/cli_hardening.cpp
  /// reads them.
  std::vector<std::pair<std::string, std::string>> hardening{};
};

/// Where `uma serve` listens and CLI clients connect by default: $XDG_RUNTIME_DIR/uma/uma.sock,
/// or /tmp/uma-UID/uma.sock without it.
[[nodiscard]] std::string default_socket_path();

/// Splits "host:port" ("[::1]:4242" for IPv6); nullopt unless the host is non-empty and the
/// port is 1 to 65535 (0 to 65535 with `port_zero_ok`: 0 takes a free port when listening).
[[nodiscard]] std::optional<std::pair<std::string, std::uint16_t>> parse_endpoint(
    std::string_view text, bool port_zero_ok = false);

/// The outcome of parsing: options, or the reason the command line is refused.
struct parse_result {
  std::optional<options> parsed;
  std::string error;                ///< "uma stats: unknown option '--jsno'"; empty when parsed
  command context = command::help;  ///< the command whose usage to point at on error
};

/// Parses the arguments after the program name. Accepts `--flag value` and `--flag=value`;
/// refuses unknown commands and options, options of another command, missing or malformed
/// values, and `--json` together with `--prometheus`. `--caf.KEY=VALUE` options of the commands
/// that run an actor system are collected, unchecked, in `options::caf_args`.
[[nodiscard]] parse_result parse_arguments(std::span<const std::string_view> args);

/// The usage text of `c` (`command::help`: the tool's overview), generated by CLI11 from the
/// options the parser declares.
[[nodiscard]] std::string usage(command c);

/// "info", "demo", ...
[[nodiscard]] std::string_view to_string(command c) noexcept;

}  // namespace uma::cli
