#pragma once

// TLS over one TCP connection of the wire's front (tls_front.hpp). uma terminates the peer's TLS
// itself (OpenSSL), so that it knows the connection's address before the handshake and its
// certificate after it; the plain HTTP/2 bytes then pass through the connection's guarded_pipe
// to gRPC. The socket is non-blocking: the front calls `handshake` whenever it is ready, and
// neither that nor reading or writing ever waits.

#include <string>

#include <openssl/types.h>

#include <uma/actors/remote/wire/detail/peer_transport.hpp>

namespace uma::detail {

class tls_transport final : public peer_transport {
 public:
  /// Takes `tcp` (a connected, non-blocking socket; closed by the destructor) and starts a
  /// server-side TLS session of `ctx` on it.
  tls_transport(int tcp, SSL_CTX* ctx);
  tls_transport(const tls_transport&) = delete;
  tls_transport& operator=(const tls_transport&) = delete;
  ~tls_transport() override;

  enum class progress { pending, done, failed };
  /// Advances the handshake as far as the socket allows.
  [[nodiscard]] progress handshake();
  /// True once the peer sent a byte (of its handshake).
  [[nodiscard]] bool heard() const;
  /// The verified client certificate's common name (after the handshake; empty if none).
  [[nodiscard]] std::string common_name() const;

  [[nodiscard]] io read(char* to, std::size_t n, std::size_t& done) override;
  [[nodiscard]] io write(const char* from, std::size_t n, std::size_t& done) override;
  /// Sends close_notify.
  void closing() noexcept override;
  [[nodiscard]] int fd() const noexcept override { return tcp_; }

 private:
  int tcp_;
  SSL* ssl_;
  bool broken_ = false;
};

}  // namespace uma::detail
