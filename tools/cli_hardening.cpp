#include "tools/cli_hardening.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>

#include <uma/actors/remote/detail/remote_checks.hpp>
#include <uma/actors/remote/remote_gateway.hpp>
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

/// RFC 6750's token68 characters.
[[nodiscard]] bool token_character(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("-._~+/=").find(c) != std::string_view::npos;
}

}  // namespace

std::string read_metrics_token(const std::string& path) {
  const auto refuse = [&](const std::string& why) {
    raise(errc::invalid_argument, "--metrics-token-file " + path + ": " + why);
  };
  // Non-blocking, then checked as a regular file: a FIFO or a device must not hang the start.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    refuse("cannot be opened");
  struct stat st {};
  std::array<char, 4098> text{};
  ssize_t n = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 077) == 0)
    n = ::read(fd, text.data(), text.size());
  ::close(fd);
  if (!S_ISREG(st.st_mode))
    refuse("is not a regular file");
  if ((st.st_mode & 077) != 0)
    refuse("others may read or write it (mode " + std::to_string(st.st_mode & 0777) +
           " in decimal); chmod 600 it");
  if (n < 0)
    refuse("cannot be read");
  std::string token(text.data(), static_cast<std::size_t>(n));
  if (!token.empty() && token.back() == '\n')
    token.pop_back();
  if (token.size() < 16 || token.size() > 4096 || !std::ranges::all_of(token, token_character))
    refuse("needs one line of 16 to 4096 characters of A-Z a-z 0-9 - . _ ~ + / =");
  return token;
}

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
    else if (flag == "--metrics-token-file" && !value.empty())
      h.metrics_token = read_metrics_token(value);
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
    if (o.what == command::serve && o.metrics_labels && h.metrics_token.empty())
      raise(errc::invalid_argument,
            "--metrics-labels shows every tenant's labels and sizes to whoever reaches the "
            "metrics endpoint, and on loopback that is every local user: give "
            "--metrics-token-file FILE too (a token only the scraper can read; Prometheus: "
            "authorization: credentials_file)");
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
