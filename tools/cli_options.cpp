#include "tools/cli_options.hpp"

#include <charconv>

namespace uma::cli {

namespace {

constexpr std::string_view overview = R"(usage: uma <command> [options]

commands:
  info    the backend uma runs on, its devices (name, compute capability, memory), driver
          and runtime versions, each device's capability flags and its memory model
  demo    the worker pipeline: producer actors pass managed batches to consumer actors
          through a transform on GPU 0 (host backend: a host loop); then the allocator
          stops while a ref is held, and a clone of that ref is shown to be inert
  stats   a short workload on an allocator, then its counters as text, JSON or
          Prometheus text exposition; with --connect host:port, a serving node's counters
  serve   runs a supervised allocator and publishes its remote interface on a port
          (CAF middleman, loopback by default; no authentication: docs/distributed.md)
  regions the region table of a serving node (--connect host:port)
  help    this text; `uma help <command>` or `uma <command> --help` for a command

every command takes:
  -h, --help                 the command's options
info, demo, stats and serve (the commands that run an allocator) take:
  --backend auto|cuda|host   auto (default): CUDA when a device is usable, else host

exit status: 0 ok, 1 runtime failure (a failed request or check, no usable device for
--backend cuda), 2 usage error
)";

constexpr std::string_view info_usage = R"(usage: uma info [--backend auto|cuda|host]

Prints the backend uma runs on (with auto: why CUDA is not usable, when it is not), each
device's name, compute capability and memory, the driver and runtime versions, the capability
flags uma reads for each device, and the memory model they add up to: whether the GPU can
access CPU memory, how the CPU reaches GPU-resident managed memory, and whether CPU/GPU
atomics work.

  --backend auto|cuda|host   the backend to describe (default auto)
  -h, --help                 this text
)";

constexpr std::string_view demo_usage =
    R"(usage: uma demo [--backend auto|cuda|host] [--producers N] [--consumers N]
                [--batches N] [--floats N] [--inject-fault OP:N:CODE[:every][:fatal]]...

Runs the worker pipeline: producer actors allocate batches of floats through the allocator
actor, fill them, prefetch them to GPU 0 (host backend: the host), transform them there (a CUDA
kernel; on the host backend a host loop), bring them back and pass the refs by message to
consumer actors, which verify every element. Prints a progress line and the allocator's stats,
then stops the allocator while a ref is held and shows that a clone of it went inert.

  --backend auto|cuda|host   the allocator's backend (default auto)
  --producers N              producer actors, 1 to 64 (default 2)
  --consumers N              consumer actors, 1 to 64 (default 2)
  --batches N                batches per producer, 1 to 1048576 (default 8)
  --floats N                 floats per batch, 1 to 268435456 (default 65536)
  --inject-fault SPEC        fail the Nth (with :every, every Nth) call of a backend operation
                             with an error code; :fatal ends the allocator incarnation, and its
                             supervisor decides (context_lost: restart, unrecoverable: stop,
                             others: escalate). OP is allocate, free, prefetch, discard,
                             discard_prefetch, advise, attributes, kind_of, is_capturing,
                             launch_host_func or synchronize. Repeatable. Example:
                             --inject-fault prefetch:5:context_lost
  -h, --help                 this text

The allocator runs under a supervisor; the supervisor's restarts and generations are printed.
Exits 1 when a batch mismatches, a request fails or a region is left live after the run; with
--inject-fault, failed batches are expected and only a leak, an unanswered request or an
escalation fails the demo.
)";

constexpr std::string_view stats_usage =
    R"(usage: uma stats [--json | --prometheus] [--workload short|none]
                 [--backend auto|cuda|host]
       uma stats --connect HOST:PORT [--json | --prometheus]

Spawns an allocator, runs a short workload on it, waits until every queued backend call has
run and prints the allocator's counters. The workload allocates four regions, fills them,
prefetches them (to GPU 0 on CUDA), advises two read-mostly, discards one, makes one zero-size
request (refused: it shows in the failure counters) and releases everything.

  --json                     one JSON object, keys named as the allocator_stats fields
  --prometheus               Prometheus text exposition (# HELP / # TYPE, labels backend,
                             generation; failures by code)
  --workload short|none      the workload above (default), or none: a fresh allocator
  --backend auto|cuda|host   the allocator's backend (default auto)
  --connect HOST:PORT        no local allocator: print the counters of the one a `uma serve`
                             runs there (text adds its supervisor's and sessions' counters)
  -h, --help                 this text
)";

constexpr std::string_view serve_usage =
    R"(usage: uma serve --port P [--bind ADDRESS] [--for SECONDS] [--quota BYTES]
                 [--backend auto|cuda|host] [--inject-fault OP:N:CODE[:every][:fatal]]...

Runs an allocator under a supervisor and publishes its remote-safe interface through CAF's
middleman: other processes (`uma stats --connect`, `uma regions --connect`, programs using
uma::remote_client) allocate, prefetch, advise, discard and release regions by id. Regions a
peer allocates are leases of its session, released when it says so or when its connection
drops. Prints `uma serve: listening on ADDRESS:PORT ...` once published, then runs until
SIGINT or SIGTERM (or --for), stops the allocator and exits 0 (1 when the supervisor gave up).

The middleman authenticates nobody: whoever reaches the port can use the allocator. So the
interface listens on 127.0.0.1 unless --bind names another address, for trusted networks only.

  --port P                   the TCP port, 0 to 65535; 0 takes a free one (printed)
  --bind ADDRESS             the address to listen on (default 127.0.0.1); a non-loopback
                             address is taken only from here, with a warning
  --for SECONDS              stop after this many seconds (1 to 604800)
  --quota BYTES              the allocator's quota (default: the backend's); also the
                             ceiling no remote request can lift
  --tenant-quota BYTES       bytes (regions plus labels) one peer node may hold
  --idle-timeout SECONDS     end sessions and drop connections idle this long (default 300)
  --operator-key-file PATH   write the operator key there (mode 0600): quota changes and the
                             whole region table need it (`uma regions --operator-key-file`)
  --max-payload BYTES        largest BASP message accepted (default 16777216)
  --tls-cert/--tls-key/--tls-ca PATH
                             TLS with certificates (CAF's OpenSSL module): peers need a
                             certificate signed by the CA file; docs/distributed.md
  --insecure                 allow a non-loopback --bind without TLS
  --backend auto|cuda|host   the allocator's backend (default auto)
  --inject-fault SPEC        as for `uma demo` (repeatable)
  -h, --help                 this text
)";

constexpr std::string_view regions_usage =
    R"(usage: uma regions --connect HOST:PORT [--json]

Prints the region table of the allocator a `uma serve` runs at HOST:PORT: id, generation,
bytes, label, refs, pins, age, the session whose lease holds the region, and for leased
regions the advice in force and the last prefetch location, as the serving node reads them.

  --connect HOST:PORT        the serving node ([::1]:PORT for IPv6)
  --json                     one JSON array, one object per region
  --operator-key-file PATH   the serving node's operator key: every session's regions
                             (without it: none of another session's)
  --tls-cert/--tls-key/--tls-ca PATH   connect over TLS with this certificate
  -h, --help                 this text
)";

/// The options each command takes (beyond --help).
enum class flag : std::uint8_t {
  backend,
  json,
  prometheus,
  workload,
  producers,
  consumers,
  batches,
  floats,
  inject_fault,
  connect,
  port,
  bind,
  for_seconds,
  quota,
  hardening  ///< --tenant-quota, --idle-timeout, ...: validated by tools/cli_hardening.cpp
};

struct flag_spec {
  std::string_view name;
  flag which;
  bool takes_value;
};

constexpr flag_spec flags[] = {
    {"--backend", flag::backend, true},
    {"--json", flag::json, false},
    {"--prometheus", flag::prometheus, false},
    {"--workload", flag::workload, true},
    {"--producers", flag::producers, true},
    {"--consumers", flag::consumers, true},
    {"--batches", flag::batches, true},
    {"--floats", flag::floats, true},
    {"--inject-fault", flag::inject_fault, true},
    {"--connect", flag::connect, true},
    {"--port", flag::port, true},
    {"--bind", flag::bind, true},
    {"--for", flag::for_seconds, true},
    {"--quota", flag::quota, true},
    {"--tenant-quota", flag::hardening, true},
    {"--idle-timeout", flag::hardening, true},
    {"--operator-key-file", flag::hardening, true},
    {"--max-payload", flag::hardening, true},
    {"--tls-cert", flag::hardening, true},
    {"--tls-key", flag::hardening, true},
    {"--tls-ca", flag::hardening, true},
    {"--insecure", flag::hardening, false},
};

[[nodiscard]] bool accepts(command c, flag f) noexcept {
  switch (c) {
    case command::info:
      return f == flag::backend;
    case command::demo:
      return f == flag::backend || f == flag::producers || f == flag::consumers ||
             f == flag::batches || f == flag::floats || f == flag::inject_fault;
    case command::stats:
      return f == flag::backend || f == flag::json || f == flag::prometheus ||
             f == flag::workload || f == flag::connect || f == flag::hardening;
    case command::serve:
      return f == flag::backend || f == flag::port || f == flag::bind || f == flag::for_seconds ||
             f == flag::quota || f == flag::inject_fault || f == flag::hardening;
    case command::regions:
      return f == flag::connect || f == flag::json || f == flag::hardening;
    case command::help:
      return false;
  }
  return false;
}

[[nodiscard]] std::optional<command> parse_command(std::string_view text) noexcept {
  if (text == "info")
    return command::info;
  if (text == "demo")
    return command::demo;
  if (text == "stats")
    return command::stats;
  if (text == "serve")
    return command::serve;
  if (text == "regions")
    return command::regions;
  if (text == "help")
    return command::help;
  return std::nullopt;
}

/// A count in [1, most]; nullopt for anything else (signs, junk, zero, too large).
[[nodiscard]] std::optional<std::size_t> parse_count(std::string_view text,
                                                     std::size_t most) noexcept {
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > most)
    return std::nullopt;
  return value;
}

struct parser {
  parse_result out;
  options o;

  /// Records a usage error of the current command; returns false for the caller to pass on.
  bool refuse(const std::string& what) {
    out.error = "uma";
    if (o.what != command::help)
      out.error.append(" ").append(to_string(o.what));
    out.error.append(": ").append(what);
    return false;
  }

  bool count(std::string_view name, std::string_view value, std::size_t most, std::size_t& target) {
    const auto n = parse_count(value, most);
    if (!n)
      return refuse(std::string(name) + " needs a count from 1 to " + std::to_string(most) +
                    ", not '" + std::string(value) + "'");
    target = *n;
    return true;
  }

  /// A number in [least, most]; nullopt for anything else.
  static std::optional<std::uint64_t> number(std::string_view text, std::uint64_t least,
                                             std::uint64_t most) noexcept {
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size() || value < least || value > most)
      return std::nullopt;
    return value;
  }

  bool apply(const flag_spec& spec, std::string_view value) {
    switch (spec.which) {
      case flag::backend: {
        const auto choice = parse_backend_choice(value);
        if (!choice)
          return refuse("unknown backend '" + std::string(value) +
                        "' (expected auto, cuda or host)");
        o.backend = *choice;
        o.backend_given = true;
        return true;
      }
      case flag::connect: {
        const auto endpoint = parse_endpoint(value);
        if (!endpoint)
          return refuse("--connect needs HOST:PORT with a port from 1 to 65535, not '" +
                        std::string(value) + "'");
        o.connect = true;
        o.connect_host = endpoint->first;
        o.connect_port = endpoint->second;
        return true;
      }
      case flag::port: {
        const auto n = number(value, 0, 65535);
        if (!n)
          return refuse("--port needs a port from 0 to 65535, not '" + std::string(value) + "'");
        o.port = static_cast<std::uint16_t>(*n);
        return true;
      }
      case flag::bind:
        if (value.empty())
          return refuse("--bind needs an address (an empty one would listen on every interface)");
        o.bind = std::string(value);
        o.bind_given = true;
        return true;
      case flag::for_seconds: {
        const auto n = number(value, 1, 604800);
        if (!n)
          return refuse("--for needs seconds from 1 to 604800, not '" + std::string(value) + "'");
        o.serve_seconds = *n;
        return true;
      }
      case flag::quota: {
        const auto n = number(value, 1, UINT64_MAX);
        if (!n)
          return refuse("--quota needs a byte count of at least 1, not '" + std::string(value) +
                        "'");
        o.quota_bytes = *n;
        return true;
      }
      case flag::hardening:
        o.hardening.emplace_back(spec.name, value);
        return true;
      case flag::json:
      case flag::prometheus: {
        const auto format =
            spec.which == flag::json ? output_format::json : output_format::prometheus;
        if (o.format != output_format::text && o.format != format)
          return refuse("--json and --prometheus exclude each other");
        o.format = format;
        return true;
      }
      case flag::workload:
        if (value == "short" || value == "none") {
          o.workload = value == "short";
          o.workload_given = true;
          return true;
        }
        return refuse("unknown workload '" + std::string(value) + "' (expected short or none)");
      case flag::producers:
        return count(spec.name, value, 64, o.producers);
      case flag::consumers:
        return count(spec.name, value, 64, o.consumers);
      case flag::batches:
        return count(spec.name, value, std::size_t{1} << 20, o.batches);
      case flag::floats:
        return count(spec.name, value, std::size_t{1} << 28, o.floats);
      case flag::inject_fault:
        try {
          o.faults.push_back(parse_fault(value));
          return true;
        } catch (const error& e) {
          return refuse(e.what());
        }
    }
    return refuse("unhandled option '" + std::string(spec.name) + "'");
  }

  /// Parses the options after the command; false (with out.error set) on the first bad one.
  bool options_after(std::span<const std::string_view> args) {
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string_view arg = args[i];
      if (arg == "--help" || arg == "-h") {
        o.help = true;
        continue;
      }
      if (!arg.starts_with("-"))
        return refuse("unexpected argument '" + std::string(arg) + "'");
      const auto eq = arg.find('=');
      const std::string_view name = arg.substr(0, eq);
      const flag_spec* spec = nullptr;
      for (const auto& f : flags)
        if (f.name == name)
          spec = &f;
      if (spec == nullptr || !accepts(o.what, spec->which))
        return refuse("unknown option '" + std::string(name) + "'");
      std::string_view value;
      if (spec->takes_value) {
        if (eq != std::string_view::npos) {
          value = arg.substr(eq + 1);
        } else if (i + 1 < args.size()) {
          value = args[++i];
        } else {
          return refuse(std::string(name) + " needs a value");
        }
      } else if (eq != std::string_view::npos) {
        return refuse(std::string(name) + " takes no value");
      }
      if (!apply(*spec, value))
        return false;
    }
    return true;
  }

  /// What no single option shows: required options, and options that exclude each other.
  bool check_combination() {
    if (o.help)
      return true;
    switch (o.what) {
      case command::serve:
        if (!o.port)
          return refuse("--port is required (0 takes a free port)");
        return true;
      case command::regions:
        if (!o.connect)
          return refuse("--connect HOST:PORT is required (the address of a `uma serve`)");
        return true;
      case command::stats:
        if (o.connect && o.workload_given)
          return refuse("--workload runs on a local allocator; it does not go with --connect");
        if (o.connect && o.backend_given)
          return refuse(
              "--backend chooses a local allocator's backend; the server at --connect "
              "has its own");
        return true;
      default:
        return true;
    }
  }
};

}  // namespace

std::optional<std::pair<std::string, std::uint16_t>> parse_endpoint(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos)
    return std::nullopt;
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  else if (host.find(':') != std::string_view::npos)
    return std::nullopt;  // an IPv6 address needs brackets: [::1]:4242
  std::uint32_t port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (host.empty() || ec != std::errc{} || end != port_text.data() + port_text.size() ||
      port == 0 || port > 65535)
    return std::nullopt;
  return std::pair(std::string(host), static_cast<std::uint16_t>(port));
}

std::string_view to_string(command c) noexcept {
  switch (c) {
    case command::info:
      return "info";
    case command::demo:
      return "demo";
    case command::stats:
      return "stats";
    case command::serve:
      return "serve";
    case command::regions:
      return "regions";
    case command::help:
      return "help";
  }
  return "help";
}

std::string_view usage(command c) noexcept {
  switch (c) {
    case command::info:
      return info_usage;
    case command::demo:
      return demo_usage;
    case command::stats:
      return stats_usage;
    case command::serve:
      return serve_usage;
    case command::regions:
      return regions_usage;
    case command::help:
      return overview;
  }
  return overview;
}

parse_result parse_arguments(std::span<const std::string_view> args) {
  parser p;
  if (args.empty()) {
    p.o.help = true;  // bare `uma`: the overview
    p.out.parsed = p.o;
    return p.out;
  }
  const std::string_view first = args.front();
  if (first == "--help" || first == "-h") {
    if (args.size() > 1) {
      p.refuse("unexpected argument '" + std::string(args[1]) + "' after " + std::string(first));
      return p.out;
    }
    p.o.help = true;
    p.out.parsed = p.o;
    return p.out;
  }
  const auto cmd = parse_command(first);
  if (!cmd) {
    p.refuse(first.starts_with("-") ? "expected a command before '" + std::string(first) + "'"
                                    : "unknown command '" + std::string(first) + "'");
    return p.out;
  }
  p.o.what = *cmd;
  p.out.context = *cmd;
  if (*cmd == command::help) {
    // `uma help [command]`: the overview, or that command's usage.
    p.o.help = true;
    if (args.size() > 2) {
      p.refuse("unexpected argument '" + std::string(args[2]) + "'");
      return p.out;
    }
    if (args.size() == 2) {
      const auto topic = parse_command(args[1]);
      if (!topic) {
        p.refuse("unknown command '" + std::string(args[1]) + "'");
        return p.out;
      }
      p.o.what = *topic;
    }
    p.out.parsed = p.o;
    return p.out;
  }
  if (p.options_after(args.subspan(1)) && p.check_combination())
    p.out.parsed = p.o;
  return p.out;
}

}  // namespace uma::cli
