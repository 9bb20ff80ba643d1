#pragma once

#include <vector>

#include <uma/sys/fault_injecting_backend.hpp>

// Command-line parsing of the `uma` tool: which command, which options, and the usage texts.
// Pure functions over the argument list, so tests can check what is accepted and refused.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <uma/sys/backend.hpp>

namespace uma::cli {

/// The tool's commands.
enum class command : std::uint8_t { help, info, demo, stats, serve, regions };

/// How `uma stats` prints the counters.
enum class output_format : std::uint8_t { text, json, prometheus };

/// Exit status of the tool.
enum exit_status : int {
  exit_ok = 0,       ///< done
  exit_failure = 1,  ///< a runtime failure: a request failed, a check failed, no device
  exit_usage = 2,    ///< the command line is wrong
};

/// A parsed command line.
struct options {
  command what = command::help;
  /// `uma <command> --help` or `uma help <command>`: print that command's usage.
  bool help = false;
  backend_choice backend = backend_choice::automatic;
  // stats
  output_format format = output_format::text;
  bool workload = true;  ///< `--workload short` (default) or `none`
  // demo (the worker pipeline's shape)
  std::size_t producers = 2;
  std::size_t consumers = 2;
  std::size_t batches = 8;
  std::size_t floats = std::size_t{1} << 16;
  std::vector<fault> faults;   ///< `demo --inject-fault`, `serve --inject-fault`, in order
  bool backend_given = false;  ///< --backend appeared (refused together with --connect)
  bool workload_given = false;
  // stats, regions: query a serving node (`uma serve`) instead of a local allocator
  bool connect = false;
  std::string connect_host{};
  std::uint16_t connect_port = 0;
  // serve
  std::optional<std::uint16_t> port{};  ///< required; 0 takes a free port
  std::string bind = "127.0.0.1";       ///< loopback unless --bind says otherwise
  bool bind_given = false;
  std::uint64_t serve_seconds = 0;  ///< --for: stop after this long; 0: at SIGINT/SIGTERM
  std::uint64_t quota_bytes = 0;    ///< --quota; 0: the backend's default
  /// serve/regions hardening flags in order (name, value); tools/cli_hardening.cpp reads them.
  std::vector<std::pair<std::string, std::string>> hardening{};
};

/// Splits "host:port" ("[::1]:4242" for IPv6); nullopt unless the host is non-empty and the
/// port is 1 to 65535.
[[nodiscard]] std::optional<std::pair<std::string, std::uint16_t>> parse_endpoint(
    std::string_view text);

/// The outcome of parsing: options, or the reason the command line is refused.
struct parse_result {
  std::optional<options> parsed;
  std::string error;                ///< "uma stats: unknown option '--jsno'"; empty when parsed
  command context = command::help;  ///< the command whose usage to point at on error
};

/// Parses the arguments after the program name. Accepts `--flag value` and `--flag=value`;
/// refuses unknown commands and options, options of another command, missing or malformed
/// values, and `--json` together with `--prometheus`.
[[nodiscard]] parse_result parse_arguments(std::span<const std::string_view> args);

/// The usage text of `c` (`command::help`: the tool's overview).
[[nodiscard]] std::string_view usage(command c) noexcept;

/// "info", "demo", ...
[[nodiscard]] std::string_view to_string(command c) noexcept;

}  // namespace uma::cli
