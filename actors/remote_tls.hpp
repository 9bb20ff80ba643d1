#pragma once

#include <string>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

namespace uma {

/// Certificates for the remote interface over TLS (CAF's OpenSSL module). Both ends present a
/// certificate signed by a CA the other end trusts (`ca_file`); a peer without one never reaches
/// BASP. See docs/distributed.md for making a CA and certificates with the openssl CLI.
struct tls_options {
  std::string certificate{};  ///< PEM certificate of this end
  std::string key{};          ///< PEM private key of `certificate`
  std::string ca_file{};      ///< PEM CA certificate(s) peers' certificates must chain to
  std::string passphrase{};   ///< of `key`, if it is encrypted

  /// True when any file is named (then all three must be).
  [[nodiscard]] bool enabled() const noexcept {
    return !certificate.empty() || !key.empty() || !ca_file.empty();
  }
};

/// Loads CAF's OpenSSL module into `cfg` with `tls`'s credentials (`openssl.certificate`,
/// `openssl.key`, `openssl.cafile`, `openssl.passphrase`): `publish_gateway` and
/// `remote_client` then speak TLS and require the peer's certificate. Call before the actor
/// system is made; the middleman must be loaded too. Throws `error(invalid_argument)` naming
/// what is missing or unreadable when only some of the three files are given or one cannot be
/// read.
void enable_tls(caf::actor_system_config& cfg, const tls_options& tls);

/// True when `sys` runs CAF's OpenSSL module (remote connections then use TLS).
[[nodiscard]] bool uses_tls(const caf::actor_system& sys);

}  // namespace uma
