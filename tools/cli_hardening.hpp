#pragma once

// The hardening flags of `uma serve` and the clients (--tenant-quota, --idle-timeout,
// --operator-cn, --max-connections-per-*, --tls-*), read from `options::hardening`.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <uma/actors/remote/remote_tls.hpp>
#include <uma/memory/allocator_stats.hpp>
#include "tools/cli_options.hpp"

namespace uma::cli {

/// What the hardening flags asked for, defaults filled in.
struct hardening_options {
  std::uint64_t tenant_quota_bytes = 0;             ///< --tenant-quota; 0: a quarter of the quota
  std::chrono::seconds idle_timeout{300};           ///< --idle-timeout; 0: never
  std::vector<std::string> operator_names{};        ///< --operator-cn, in order
  std::uint32_t max_connections_per_identity = 16;  ///< --max-connections-per-identity
  std::uint32_t max_connections_per_address = 32;   ///< --max-connections-per-address
  tls_options tls{};                                ///< --tls-cert, --tls-key, --tls-ca
  bool insecure_metrics = false;  ///< --insecure-metrics: --metrics off loopback, plain HTTP
  std::string metrics_token{};    ///< --metrics-token-file: the bearer token /metrics asks for
};

/// The bearer token in `path` (--metrics-token-file): a regular file only its owner may read or
/// write, holding 16 to 4096 characters of RFC 6750's token68 set (a trailing newline allowed).
/// Throws `error(invalid_argument)` naming the file and what is wrong with it.
[[nodiscard]] std::string read_metrics_token(const std::string& path);

/// Reads `o.hardening`; throws `error(invalid_argument)` naming the flag and the value refused.
[[nodiscard]] hardening_options parse_hardening(const options& o);

/// `uma serve` listens on TCP only with mutual TLS: throws `error(invalid_argument)` for --port
/// without the three TLS files. Returns a warning to log for a non-loopback `bind`.
[[nodiscard]] std::string check_bind_policy(const options& o, const hardening_options& h);

/// The hardening flags as a usage matter, checked before any command starts: what
/// `parse_hardening` refuses and, for `uma serve`, what `check_bind_policy` refuses (--port
/// without the TLS files) and --metrics-labels without --metrics-token-file (the labels name
/// every tenant's holdings, and loopback is every local user's). Returns the complaint, empty
/// when the flags are accepted.
[[nodiscard]] std::string hardening_complaint(const options& o);

/// A serving node's counters made safe to print on a terminal, in every format: the one text in
/// them, the backend's name, with control characters and terminal escapes escaped (the
/// server at --connect may not be uma's: issue 35, finding 7).
[[nodiscard]] allocator_stats printable(allocator_stats from_server);

}  // namespace uma::cli
