#pragma once

// The hardening flags of `uma serve` and `uma regions` (--tenant-quota, --idle-timeout,
// --operator-key-file, --max-payload), read from `options::hardening`, and the operator key
// file.

#include <chrono>
#include <cstdint>
#include <string>

#include <uma/actors/remote_tls.hpp>
#include <uma/messages/remote_types.hpp>
#include "tools/cli_options.hpp"

namespace uma::cli {

/// What the hardening flags asked for, defaults filled in.
struct hardening_options {
  std::uint64_t tenant_quota_bytes = 0;    ///< --tenant-quota; 0: none
  std::chrono::seconds idle_timeout{300};  ///< --idle-timeout; 0: never
  std::string operator_key_file{};         ///< --operator-key-file; empty: none
  std::uint32_t max_payload = 16u << 20;   ///< --max-payload (BASP payload bytes)
  tls_options tls{};                       ///< --tls-cert, --tls-key, --tls-ca
  bool insecure = false;                   ///< --insecure: non-loopback bind without TLS
};

/// Reads `o.hardening`; throws `error(invalid_argument)` naming the flag and the value refused.
[[nodiscard]] hardening_options parse_hardening(const options& o);

/// `uma serve` listens on a non-loopback `bind` only with TLS, or with --insecure (then it
/// returns a warning to log). Throws `error(invalid_argument)` naming the address otherwise.
[[nodiscard]] std::string check_bind_policy(const std::string& bind, const hardening_options& h);

/// Writes `key` to `path` as 32 hex digits, readable by the owner only (0600). Throws
/// `error(backend_error)` naming the path and the reason.
void write_operator_key(const std::string& path, const operator_key& key);

/// Reads the key `write_operator_key` wrote. Throws `error(invalid_argument)` naming the path.
[[nodiscard]] operator_key read_operator_key(const std::string& path);

}  // namespace uma::cli
