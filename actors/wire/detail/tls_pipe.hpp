#pragma once

// One TCP connection of the wire's TLS front (tls_front.hpp). uma terminates the peer's TLS
// itself (OpenSSL), so that it knows the connection's address before the handshake and its
// certificate after it, and passes the plain HTTP/2 bytes to gRPC through a socket pair whose
// other end gRPC serves (AddInsecureChannelFromFd). Both sockets are non-blocking: the front
// calls `handshake` or `pump` whenever either is ready, and neither ever waits.

#include <array>
#include <cstddef>
#include <string>

#include <openssl/types.h>

namespace uma::detail {

class tls_pipe {
 public:
  /// Takes `tcp` (a connected, non-blocking socket; closed by the destructor) and starts a
  /// server-side TLS session of `ctx` on it.
  tls_pipe(int tcp, SSL_CTX* ctx);
  tls_pipe(const tls_pipe&) = delete;
  tls_pipe& operator=(const tls_pipe&) = delete;
  /// Closes both sockets: gRPC sees its end close and ends the connection's calls.
  ~tls_pipe();

  enum class progress { pending, done, failed };
  /// Advances the handshake as far as the socket allows.
  [[nodiscard]] progress handshake();
  /// The verified client certificate's common name (after the handshake; empty if none).
  [[nodiscard]] std::string common_name() const;
  /// Makes the socket pair: returns gRPC's end (which gRPC then owns), or -1 when the process
  /// is out of descriptors.
  [[nodiscard]] int open_inner();
  enum class flow {
    waiting,  ///< nothing more moves until a socket is ready again
    more,     ///< the round's budget is spent and bytes are still ready: pump again soon
    ended     ///< either side closed (after what it sent was passed on) or failed
  };
  /// Moves bytes both ways until nothing more moves, or at most `rounds` buffers each way (so
  /// that one busy connection cannot keep the front from the others).
  [[nodiscard]] flow pump(int rounds = 64);

  [[nodiscard]] int tcp() const noexcept { return tcp_; }
  [[nodiscard]] int inner() const noexcept { return inner_; }

 private:
  /// A direction's bytes read but not yet written.
  struct buffer {
    std::array<char, 16384> bytes{};
    std::size_t begin = 0;
    std::size_t end = 0;
    [[nodiscard]] bool empty() const noexcept { return begin == end; }
  };
  bool tls_to_inner();
  bool inner_to_tls();

  int tcp_;
  int inner_ = -1;
  SSL* ssl_;
  buffer from_tls_;
  buffer from_inner_;
  bool tls_ended_ = false;
  bool inner_ended_ = false;
  bool broken_ = false;
};

}  // namespace uma::detail
