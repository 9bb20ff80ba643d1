#include "tools/cli_options.hpp"

#include <charconv>

namespace uma::cli {

namespace {

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
  quota
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
             f == flag::workload || f == flag::connect;
    case command::serve:
      return f == flag::backend || f == flag::port || f == flag::bind || f == flag::for_seconds ||
             f == flag::quota || f == flag::inject_fault;
    case command::regions:
      return f == flag::connect || f == flag::json;
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

  /// The options of the networked commands (serve, --connect) and the serving node's quota.
  bool apply_network(flag which, std::string_view value) {
    switch (which) {
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
      default:
        break;
    }
    return refuse("unhandled option");
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
      case flag::connect:
      case flag::port:
      case flag::bind:
      case flag::for_seconds:
      case flag::quota:
        return apply_network(spec.which, value);
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
