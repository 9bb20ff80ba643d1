#pragma once

// TLS credentials of the wire, read and checked whole (at a server's start and on its reload
// signal, at a client's construction): a file truncated or replaced later changes nothing until
// it is read again, and a set that fails a check is never used.

#include <memory>
#include <string>

#include <openssl/types.h>

#include <uma/actors/remote/remote_tls.hpp>

namespace uma::detail {

/// The PEM texts gRPC takes.
struct pem_credentials {
  std::string certificate{};
  std::string key{};
  std::string ca{};
};

/// Reads the three files of `tls` (each at most 1 MiB) and checks them with OpenSSL: the
/// certificate and the CA parse as X.509, the certificate is within its validity period, the key
/// parses and belongs to the certificate. Throws `error(invalid_argument)` naming the option, the
/// file and what is wrong.
[[nodiscard]] pem_credentials load_pem_credentials(const tls_options& tls);

/// The server side of the wire's mutual TLS, from checked credentials: TLS 1.2 or later, a client
/// certificate chaining to `pem.ca` required, ALPN "h2" (gRPC clients insist on it), no session
/// resumption (every connection proves its certificate). Throws `error(invalid_argument)` naming
/// the file OpenSSL refused (`tls` names them).
[[nodiscard]] std::shared_ptr<SSL_CTX> make_server_context(const pem_credentials& pem,
                                                           const tls_options& tls);

/// The common name of the verified client certificate of `ssl`; empty when there is none.
[[nodiscard]] std::string peer_common_name(SSL* ssl);

}  // namespace uma::detail
