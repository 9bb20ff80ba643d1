#include "tools/cli_hardening.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

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
    else if (flag == "--max-payload")
      h.max_payload = static_cast<std::uint32_t>(number(flag, value, 1024, UINT32_MAX));
    else if (flag == "--operator-key-file" && !value.empty())
      h.operator_key_file = value;
    else if (flag == "--tls-cert" && !value.empty())
      h.tls.certificate = value;
    else if (flag == "--tls-key" && !value.empty())
      h.tls.key = value;
    else if (flag == "--tls-ca" && !value.empty())
      h.tls.ca_file = value;
    else if (flag == "--insecure")
      h.insecure = true;
    else
      raise(errc::invalid_argument, flag + " needs a value, not '" + value + "'");
  }
  return h;
}

std::string check_bind_policy(const std::string& bind, const hardening_options& h) {
  if (is_loopback_address(bind) || h.tls.enabled())
    return {};
  if (!h.insecure)
    raise(errc::invalid_argument,
          "refusing to listen on " + bind +
              ", which is not a loopback address, without TLS: give --tls-cert, --tls-key and "
              "--tls-ca, or --insecure for a trusted network (docs/distributed.md)");
  return "WARNING: listening on " + bind +
         " without TLS (--insecure): whoever reaches this port can open a session and allocate "
         "up to the tenant quota here, and anyone on the path reads the traffic.";
}

void write_operator_key(const std::string& path, const operator_key& key) {
  // A fresh file, owner-only from its creation on (no window where others could read it).
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    raise(errc::backend_error,
          "cannot write the operator key to " + path + ": " + std::strerror(errno));
  const auto text = to_hex(key) + "\n";
  const auto written = ::write(fd, text.data(), text.size());
  const bool ok = written == static_cast<ssize_t>(text.size()) && ::fchmod(fd, 0600) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok)
    raise(errc::backend_error,
          "cannot write the operator key to " + path + ": " + std::strerror(saved));
}

operator_key read_operator_key(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const auto key = in ? parse_operator_key(text.str()) : std::nullopt;
  if (!key)
    raise(errc::invalid_argument, "--operator-key-file " + path +
                                      ": no operator key there (32 hex digits, as `uma serve "
                                      "--operator-key-file` writes them)");
  return *key;
}

}  // namespace uma::cli
