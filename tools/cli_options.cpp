#include "tools/cli_options.hpp"

#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <memory>

#include <CLI/CLI.hpp>

#include "tools/cli_arbiter_options.hpp"
#include "tools/cli_texts.hpp"

namespace uma::cli {

namespace {

/// CLI11's help layout with uma's synopsis line ("usage: uma demo [...]").
class usage_formatter final : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string) const override {
    const auto c = app->get_parent() == nullptr ? command::help : command_of(app->get_name());
    std::string out = "usage: " + std::string(text_of(c).synopsis) + "\n";
    if (c != command::help)
      out.append("\n").append(text_of(c).summary).append("\n");
    return out;
  }

  /// The summary follows the synopsis (make_usage), not the other way round.
  std::string make_description(const CLI::App*) const override { return {}; }

  static command command_of(std::string_view name) noexcept {
    for (const auto& t : command_texts())
      if (to_string(t.which) == name)
        return t.which;
    return command::help;
  }
};

/// A count in [1, most]; throws a ValidationError naming the option otherwise.
[[nodiscard]] std::size_t count(std::string_view name, const std::string& text, std::size_t most) {
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > most)
    throw CLI::ValidationError(std::string(name) + " needs a count from 1 to " +
                               std::to_string(most) + ", not '" + text + "'");
  return value;
}

/// A number in [least, most]; throws a ValidationError with `what` otherwise.
[[nodiscard]] std::uint64_t number(const std::string& text, std::uint64_t least, std::uint64_t most,
                                   const std::string& what) {
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < least || value > most)
    throw CLI::ValidationError(what + ", not '" + text + "'");
  return value;
}

/// `--host-devices N[:BYTES]`: how many devices the host backend emulates and each one's memory.
[[nodiscard]] emulated_devices host_devices(const std::string& text) {
  const auto colon = text.find(':');
  const std::string what = "--host-devices needs N[:BYTES], N from 0 to " +
                           std::to_string(emulated_devices::max_count) + " and BYTES at least 1";
  emulated_devices out;
  out.count = static_cast<int>(number(text.substr(0, colon), 0, emulated_devices::max_count, what));
  if (colon != std::string::npos)
    out.memory_bytes = number(text.substr(colon + 1), 1, UINT64_MAX, what);
  return out;
}

/// The commands that take --caf.KEY=VALUE options (those that run an actor system, and restart).
[[nodiscard]] bool runs_caf(command c) noexcept {
  return c != command::info && c != command::budgets;
}

/// The `uma` command line as a CLI11 app whose options write into one `options` value.
class command_line {
 public:
  command_line();
  command_line(const command_line&) = delete;
  command_line& operator=(const command_line&) = delete;

  CLI::App app{"", "uma"};
  options o;
  bool top_help = false;
  std::string help_topic;
  bool json = false;
  bool prometheus = false;

  [[nodiscard]] CLI::App* sub(command c) const {
    return app.get_subcommand(std::string(to_string(c)));
  }
  /// The command that was given (`command::help` when none was).
  [[nodiscard]] command given() const;

 private:
  CLI::App& add(command c);
  void add_backend(CLI::App& s);
  void add_workload(CLI::App& s, const char* what);
  void add_faults(CLI::App& s);
  void add_hardening(CLI::App& s, command c);
  void add_connect(CLI::App& s, const char* what);
  void add_sockets(CLI::App& s);
  void add_demo();
  void add_stats_and_regions();
  void add_snapshot();
  void add_serve();
  void add_budgets();
};

CLI::App& command_line::add(command c) {
  auto& s = *app.add_subcommand(std::string(to_string(c)), std::string(text_of(c).summary));
  s.set_help_flag();  // --help is an ordinary flag: parsing goes on, the options are checked
  s.add_flag("-h,--help", o.help, "this text");
  s.allow_extras();  // collected by parse_arguments: --caf.* passes, anything else is refused
  s.footer(std::string(text_of(c).details) + std::string(runs_caf(c) ? caf_note : ""));
  return s;
}

command_line::command_line() {
  app.formatter(std::make_shared<usage_formatter>());
  app.get_formatter()->column_width(30);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(0, 1);
  app.allow_extras();
  app.set_help_flag();
  app.add_flag("-h,--help", top_help, "this text");
  app.add_flag("--version", o.version, "the version of uma, as `uma info` prints it");
  app.footer(std::string(text_of(command::help).details));
  add_backend(add(command::info));
  add_demo();
  add_stats_and_regions();
  add_snapshot();
  add_serve();
  auto& restart = add(command::restart);
  add_connect(restart, "the serving node whose allocator to restart; required");
  add_hardening(restart, command::restart);
  add_budgets();
  auto& help = *app.add_subcommand("help", "this text; `uma help <command>` for a command");
  help.add_option("command", help_topic, "the command to explain");
}

command command_line::given() const {
  for (const auto c : {command::info, command::demo, command::stats, command::serve,
                       command::regions, command::snapshot, command::restart, command::budgets})
    if (sub(c)->parsed())
      return c;
  return command::help;
}

/// `--workload short|none` of `stats` and `snapshot`: what runs before the counters are read.
void command_line::add_workload(CLI::App& s, const char* what) {
  s.add_option_function<std::string>(
       "--workload",
       [this](const std::string& v) {
         if (v != "short" && v != "none")
           throw CLI::ValidationError("unknown workload '" + v + "' (expected short or none)");
         o.workload = v == "short";
         o.workload_given = true;
       },
       what)
      ->type_name("short|none");
}

void command_line::add_backend(CLI::App& s) {
  s.add_option_function<std::string>(
       "--backend",
       [this](const std::string& v) {
         const auto choice = parse_backend_choice(v);
         if (!choice)
           throw CLI::ValidationError("unknown backend '" + v + "' (expected auto, cuda or host)");
         o.backend = *choice;
         o.backend_given = true;
       },
       "auto (default): CUDA when a device is usable, else host")
      ->type_name("auto|cuda|host");
  s.add_option_function<std::string>(
       "--host-devices",
       [this](const std::string& v) {
         o.host_devices = host_devices(v);
         o.backend_given = true;
       },
       "devices the host backend emulates and each one's memory (default 1, half of physical "
       "memory)")
      ->type_name("N[:BYTES]");
}

void command_line::add_faults(CLI::App& s) {
  s.add_option_function<std::vector<std::string>>(
       "--inject-fault",
       [this](const std::vector<std::string>& specs) {
         for (const auto& spec : specs) {
           try {
             o.faults.push_back(parse_fault(spec));
           } catch (const error& e) {
             throw CLI::ValidationError(e.what());
           }
         }
       },
       "fail a backend call: OP:N:CODE[:every][:fatal] (repeatable)")
      ->type_name("SPEC")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

/// The TLS and hardening flags (tools/cli_hardening.cpp reads and checks their values): TLS for
/// every command that connects or serves, the operator key for serve and regions, the serving
/// node's limits for serve only.
void command_line::add_hardening(CLI::App& s, command c) {
  const auto pass = [&](const char* name, const char* type, const char* what) {
    s.add_option_function<std::string>(
         name, [this, name](const std::string& v) { o.hardening.emplace_back(name, v); }, what)
        ->type_name(type);
  };
  pass("--tls-cert", "PATH", "mutual TLS over TCP: this end's certificate (PEM)");
  pass("--tls-key", "PATH", "mutual TLS: the certificate's private key (PEM)");
  pass("--tls-ca", "PATH", "mutual TLS: accept only peers with a certificate signed by this CA");
  if (c != command::serve)
    return;
  pass("--operator-cn", "NAME",
       "a client certificate with this common name is the operator over TCP (repeatable)");
  pass("--tenant-quota", "BYTES",
       "bytes (regions plus labels) one tenant may hold (default: a quarter of the quota)");
  pass("--idle-timeout", "SECONDS", "end sessions and drop connections idle this long (300)");
  pass("--max-connections-per-identity", "N",
       "connections one uid (socket) or certificate name (TCP) may hold open, 1 to 65536 (16)");
  pass("--max-connections-per-address", "N",
       "TLS handshakes one remote address may have under way, 1 to 65536 (32)");
  s.add_flag_callback(
      "--insecure-metrics", [this] { o.hardening.emplace_back("--insecure-metrics", ""); },
      "allow --metrics off loopback (plain HTTP, no authentication)");
  pass("--metrics-token-file", "PATH",
       "/metrics answers only requests with this bearer token (a file only you may read); "
       "--metrics-labels needs it");
}

void command_line::add_demo() {
  auto& s = add(command::demo);
  add_backend(s);
  const auto counted = [&](const char* name, std::size_t most, std::size_t& target,
                           const char* what) {
    s.add_option_function<std::string>(
         name, [name, most, &target](const std::string& v) { target = count(name, v, most); }, what)
        ->type_name("N");
  };
  counted("--producers", 64, o.producers, "producer actors, 1 to 64 (default 2)");
  counted("--consumers", 64, o.consumers, "consumer actors, 1 to 64 (default 2)");
  counted("--batches", std::size_t{1} << 20, o.batches,
          "batches per producer, 1 to 1048576 (default 8)");
  counted("--floats", std::size_t{1} << 28, o.floats,
          "floats per batch, 1 to 268435456 (default 65536)");
  add_faults(s);
}

void command_line::add_connect(CLI::App& s, const char* what) {
  s.add_option_function<std::string>(
       "--connect",
       [this](const std::string& v) {
         o.connect = true;
         if (v.starts_with("unix:") && v.size() > 5) {
           o.connect_target = v;
           return;
         }
         const auto endpoint = parse_endpoint(v);
         if (!endpoint)
           throw CLI::ValidationError(
               "--connect needs unix:PATH or HOST:PORT with a port from 1 to 65535, not '" + v +
               "'");
         o.connect_target = v;
         o.connect_host = endpoint->first;
         o.connect_port = endpoint->second;
       },
       what)
      ->type_name("unix:PATH|HOST:PORT");
}

void command_line::add_stats_and_regions() {
  auto& stats = add(command::stats);
  stats.add_flag("--json", json, "one JSON object, keys named as the allocator_stats fields")
      ->disable_flag_override();
  stats
      .add_flag("--prometheus", prometheus,
                "Prometheus text exposition (# HELP / # TYPE; labels backend, generation)")
      ->disable_flag_override();
  add_workload(stats, "the workload above (default), or none: a fresh allocator's counters");
  add_backend(stats);
  add_connect(stats, "print the counters of the allocator a `uma serve` runs there");
  add_hardening(stats, command::stats);
  auto& regions = add(command::regions);
  add_connect(regions, "the serving node ([::1]:PORT for IPv6); required");
  regions.add_flag("--json", json, "one JSON array, one object per region")
      ->disable_flag_override();
  add_hardening(regions, command::regions);
}

void command_line::add_snapshot() {
  auto& s = add(command::snapshot);
  const auto file = [&](const char* name, std::string& target, const char* what) {
    s.add_option_function<std::string>(
         name,
         [name, &target](const std::string& v) {
           if (v.empty())
             throw CLI::ValidationError(std::string(name) + " needs a file name (- for stdout)");
           target = v;
         },
         what)
        ->type_name("FILE");
  };
  file("--json", o.snapshot_json, "write the snapshot as JSON there (-: stdout, the default)");
  file("--html", o.snapshot_html, "write the snapshot as one self-contained HTML page there");
  add_workload(s, "the workload above (default), or none: a fresh allocator");
  add_backend(s);
  add_connect(s, "the snapshot of a `uma serve` there instead (its operator socket)");
  add_hardening(s, command::snapshot);
}

/// Where `uma serve` listens for local processes: the tenants' and the operator's sockets.
void command_line::add_sockets(CLI::App& s) {
  s.add_option("--socket", o.socket_path,
               "the tenants' Unix socket (default $XDG_RUNTIME_DIR/uma/uma.sock, or "
               "/tmp/uma-UID/uma.sock)")
      ->type_name("PATH");
  s.add_option_function<std::string>(
       "--socket-mode",
       [this](const std::string& v) {
         if (v != "0600" && v != "0660")
           throw CLI::ValidationError("--socket-mode needs 0600 or 0660, not '" + v + "'");
         o.socket_mode = v == "0600" ? 0600 : 0660;
       },
       "who may connect: 0600 (this user, the default) or 0660 (and its group)")
      ->type_name("MODE");
  s.add_option("--operator-socket", o.operator_socket_path,
               "the operator's Unix socket, mode 0600 (default: the socket's path + .operator)")
      ->type_name("PATH");
}

void command_line::add_serve() {
  auto& s = add(command::serve);
  add_sockets(s);
  s.add_option_function<std::string>(
       "--port",
       [this](const std::string& v) {
         o.port =
             static_cast<std::uint16_t>(number(v, 0, 65535, "--port needs a port from 0 to 65535"));
       },
       "also listen on TCP with mutual TLS (--tls-*), 0 to 65535; 0 takes a free one")
      ->type_name("P");
  s.add_option_function<std::string>(
       "--bind",
       [this](const std::string& v) {
         if (v.empty())
           throw CLI::ValidationError(
               "--bind needs an address (an empty one would listen on every interface)");
         o.bind = v;
         o.bind_given = true;
       },
       "the address to listen on (default 127.0.0.1); others with a warning")
      ->type_name("ADDRESS");
  s.add_option_function<std::string>(
       "--metrics",
       [this](const std::string& v) {
         o.metrics = parse_endpoint(v, true);
         if (!o.metrics)
           throw CLI::ValidationError(
               "--metrics needs HOST:PORT with a port from 0 to 65535, "
               "not '" +
               v + "'");
       },
       "serve GET /metrics and /healthz over HTTP there (loopback; port 0: a free one)")
      ->type_name("HOST:PORT");
  s.add_flag("--metrics-labels", o.metrics_labels,
             "add live regions and bytes by label (a region report at most every 5 s)")
      ->disable_flag_override();
  s.add_option_function<std::string>(
       "--for",
       [this](const std::string& v) {
         o.serve_seconds = number(v, 1, 604800, "--for needs seconds from 1 to 604800");
       },
       "stop after this many seconds (1 to 604800)")
      ->type_name("SECONDS");
  s.add_option_function<std::string>(
       "--quota",
       [this](const std::string& v) {
         o.quota_bytes = number(v, 1, UINT64_MAX, "--quota needs a byte count of at least 1");
       },
       "the allocator's quota (default: the backend's); also the ceiling no remote request "
       "can lift")
      ->type_name("BYTES");
  add_backend(s);
  add_faults(s);
  add_hardening(s, command::serve);
  add_arbiter_options(s, o);
}

void command_line::add_budgets() {
  auto& s = add(command::budgets);
  add_connect(s, "the serving node (its operator socket for --set-*); required");
  s.add_flag("--json", json, "one JSON object: the devices, their members, every decision kept")
      ->disable_flag_override();
  add_budget_settings(s, o);
  add_hardening(s, command::budgets);
}

/// Sorts what CLI11 left over for command `c`: `--caf.*` options of the commands that run an
/// actor system go to `caf_args`; the first anything else is the error.
[[nodiscard]] std::string take_extras(command_line& cl, command c) {
  const bool caf_ok = runs_caf(c);
  for (const auto& extra : cl.sub(c)->remaining()) {
    if (caf_ok && extra.starts_with("--caf.")) {
      cl.o.caf_args.push_back(extra);
      continue;
    }
    if (extra.starts_with("-"))
      return "unknown option '" + extra.substr(0, extra.find('=')) + "'";
    return "unexpected argument '" + extra + "'";
  }
  return {};
}

/// `uma snapshot`: one of its forms to stdout at most; a local allocator's options, or a
/// serving node's (--connect with the operator key, TLS), not both.
[[nodiscard]] std::string check_snapshot(const options& o) {
  if (o.snapshot_json == "-" && o.snapshot_html == "-")
    return "--json - and --html - cannot both write to stdout";
  if (!o.connect)
    return o.hardening.empty() ? ""
                               : o.hardening.front().first +
                                     " is for a serving node's snapshot; it goes with --connect";
  if (o.workload_given)
    return "--workload runs on a local allocator; it does not go with --connect";
  if (o.backend_given)
    return "--backend and --host-devices choose a local allocator's backend; the server at "
           "--connect has its own";
  return {};
}

/// What no single option shows: required options, and options that exclude each other.
[[nodiscard]] std::string check_combination(const options& o, bool json, bool prometheus) {
  if (o.help)
    return {};
  switch (o.what) {
    case command::serve:
      if (!o.operator_socket_path.empty() && o.operator_socket_path == o.socket_path)
        return "--operator-socket must differ from --socket (the operator's connections would "
               "be the tenants')";
      if (!o.port && o.bind_given)
        return "--bind is for TCP; it goes with --port";
      return check_arbiter_combination(o);
    case command::regions:
    case command::restart:
    case command::budgets:
      return o.connect ? ""
                       : "--connect unix:PATH or HOST:PORT is required (the address of a `uma "
                         "serve`)";
    case command::snapshot:
      return check_snapshot(o);
    case command::stats:
      if (json && prometheus)
        return "--json and --prometheus exclude each other";
      if (o.connect && o.workload_given)
        return "--workload runs on a local allocator; it does not go with --connect";
      if (o.connect && o.backend_given)
        return "--backend and --host-devices choose a local allocator's backend; the server at "
               "--connect has its own";
      return {};
    default:
      return {};
  }
}

/// The top level: `uma`, `uma --help`, `uma help [command]`, or what is wrong before a command.
[[nodiscard]] std::string check_top_level(command_line& cl) {
  const auto extras = cl.app.remaining();
  if (!extras.empty()) {
    if (extras.front().starts_with("-"))
      return "expected a command before '" + extras.front() + "'";
    return (cl.app.get_subcommands().empty() ? "unknown command '" : "unexpected argument '") +
           extras.front() + "'";
  }
  if (cl.o.version)
    return cl.o.what == command::help && !cl.top_help && !cl.app.get_subcommand("help")->parsed()
               ? ""
               : "--version goes alone, without a command or --help";
  if (cl.o.what != command::help)
    return {};  // the command's own options are checked by take_extras
  cl.o.help = true;
  if (!cl.help_topic.empty()) {
    const auto topic = usage_formatter::command_of(cl.help_topic);
    if (topic == command::help && cl.help_topic != "help")
      return "unknown command '" + cl.help_topic + "'";
    cl.o.what = topic;
  }
  return {};
}

}  // namespace

std::string default_socket_path() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime != nullptr && runtime[0] == '/')
    return std::string(runtime) + "/uma/uma.sock";
  return "/tmp/uma-" + std::to_string(::getuid()) + "/uma.sock";
}

std::optional<std::pair<std::string, std::uint16_t>> parse_endpoint(std::string_view text,
                                                                    bool port_zero_ok) {
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
      (port == 0 && !port_zero_ok) || port > 65535)
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
    case command::snapshot:
      return "snapshot";
    case command::restart:
      return "restart";
    case command::budgets:
      return "budgets";
    case command::help:
      return "help";
  }
  return "help";
}

std::string usage(command c) {
  const command_line cl;
  return c == command::help ? cl.app.help() : cl.sub(c)->help();
}

parse_result parse_arguments(std::span<const std::string_view> args) {
  command_line cl;
  parse_result out;
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
  std::string error;
  try {
    cl.app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    error = e.what();
  }
  cl.o.what = cl.given();
  if (error.empty()) {
    if (auto top = check_top_level(cl); !top.empty()) {
      out.error = "uma: " + top;  // what comes before the command
      return out;
    }
  }
  out.context = cl.o.what;
  if (error.empty() && cl.o.what != command::help)
    error = take_extras(cl, cl.o.what);
  if (error.empty())
    error = check_combination(cl.o, cl.json, cl.prometheus);
  if (!error.empty()) {
    out.error = cl.o.what == command::help
                    ? "uma: " + error
                    : "uma " + std::string(to_string(cl.o.what)) + ": " + error;
    return out;
  }
  if (cl.json || cl.prometheus)
    cl.o.format = cl.json ? output_format::json : output_format::prometheus;
  out.parsed = cl.o;
  return out;
}

}  // namespace uma::cli
