#pragma once

// TLS credentials of the wire, read and checked once (at a server's start, at a client's
// construction): a file truncated or replaced later changes nothing until the next start.

#include <string>

#include <uma/actors/remote_tls.hpp>

namespace uma::detail {

/// The PEM texts gRPC takes.
struct pem_credentials {
  std::string certificate{};
  std::string key{};
  std::string ca{};
};

/// Reads the three files of `tls` (each at most 1 MiB) and checks them with OpenSSL: the
/// certificate and the CA parse as X.509, the key parses and belongs to the certificate.
/// Throws `error(invalid_argument)` naming the option, the file and what is wrong.
[[nodiscard]] pem_credentials load_pem_credentials(const tls_options& tls);

}  // namespace uma::detail
