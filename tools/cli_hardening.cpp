#include "tools/cli_hardening.hpp"

#include <charconv>

#include <uma/actors/detail/remote_checks.hpp>
#include <uma/actors/remote_gateway.hpp>
#include <uma/sys/error.hpp>

namespace uma::cli {

namespace {

[[nodiscard]] std::uint64_t number(const std::string& flag, const std::string& value,
                                   std::uint64_t least, std::uint64_t most) {
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc{} || end != value.data() + value.size() || n < least || n > most)
    raise(errc::invalid_argument, flag + " needs a number from " + std::to_string(least) + " to " +
                                      std::to_string(most) + ", not '" + value + "'");
  return n;
}

}  // namespace

hardening_options parse_hardening(const options& o) {
  hardening_options h;
  for (const auto& [flag, value] : o.hardening) {
    if (flag == "--tenant-quota")
      h.tenant_quota_bytes = number(flag, value, 1, UINT64_MAX);
    else if (flag == "--idle-timeout")
      h.idle_timeout = std::chrono::seconds(number(flag, value, 0, 604800));
    else if (flag == "--max-connections-per-identity")
      h.max_connections_per_identity = static_cast<std::uint32_t>(number(flag, value, 1, 65536));
    else if (flag == "--max-connections-per-address")
      h.max_connections_per_address = static_cast<std::uint32_t>(number(flag, value, 1, 65536));
    else if (flag == "--operator-cn" && !value.empty() && value.size() <= 64)
      h.operator_names.push_back(value);
    else if (flag == "--tls-cert" && !value.empty())
      h.tls.certificate = value;
    else if (flag == "--tls-key" && !value.empty())
      h.tls.key = value;
    else if (flag == "--tls-ca" && !value.empty())
      h.tls.ca_file = value;
    else if (flag == "--insecure-metrics")
      h.insecure_metrics = true;
    else
      raise(errc::invalid_argument, flag + " needs a value, not '" + value + "'");
  }
  return h;
}

std::string check_bind_policy(const options& o, const hardening_options& h) {
  if (!o.port)
    return {};
  if (h.tls.certificate.empty() || h.tls.key.empty() || h.tls.ca_file.empty())
    raise(errc::invalid_argument,
          "--port listens on TCP, which uma serve does only with mutual TLS: give --tls-cert, "
          "--tls-key and --tls-ca (local processes use the Unix socket; docs/distributed.md)");
  if (is_loopback_address(o.bind))
    return {};
  return "listening on " + o.bind +
         ", not a loopback address: any holder of a certificate of the CA given may connect";
}

std::string hardening_complaint(const options& o) {
  try {
    const auto h = parse_hardening(o);
    if (o.what == command::serve)
      static_cast<void>(check_bind_policy(o, h));  // its warning is logged when serve starts
  } catch (const error& e) {
    // Both raise invalid_argument for a refused flag and nothing else; anything else goes on.
    if (e.code() != errc::invalid_argument)
      throw;
    return e.what();
  }
  return {};
}

allocator_stats printable(allocator_stats from_server) {
  from_server.backend = detail::escape_control(from_server.backend);
  return from_server;
}

}  // namespace uma::cli
