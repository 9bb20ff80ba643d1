#pragma once

#include <string>

namespace uma {

/// Certificate files for the remote interface over TCP, which the wire serves with mutual TLS
/// only (docs/distributed.md "TLS"): both ends present a certificate signed by a CA the other
/// end trusts (`ca_file`). Read and checked whole when a server starts (and when it reloads them:
/// `wire_server::reload_tls`) or a client connects, never per connection.
struct tls_options {
  std::string certificate{};  ///< PEM certificate of this end
  std::string key{};          ///< PEM private key of `certificate` (unencrypted)
  std::string ca_file{};      ///< PEM CA certificate(s) peers' certificates must chain to

  /// True when any file is named (then all three must be).
  [[nodiscard]] bool enabled() const noexcept {
    return !certificate.empty() || !key.empty() || !ca_file.empty();
  }
};

}  // namespace uma
