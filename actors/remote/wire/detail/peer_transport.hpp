#pragma once

// How uma's front reaches the peer of a connection (guarded_pipe.hpp): the accepted socket as it
// is (a Unix-socket connection: socket_transport), or TLS over it (tls_transport.hpp). Both are
// non-blocking: an operation that would wait says so and returns.

#include <cstddef>

namespace uma::detail {

class peer_transport {
 public:
  enum class io {
    moved,    ///< bytes moved (`done` says how many)
    blocked,  ///< nothing moves until the socket is ready again
    ended     ///< the peer closed, or the connection failed
  };
  virtual ~peer_transport() = default;
  /// Reads at most `n` bytes into `to`.
  [[nodiscard]] virtual io read(char* to, std::size_t n, std::size_t& done) = 0;
  /// Writes at most `n` bytes of `from` (after `blocked`, the same bytes again).
  [[nodiscard]] virtual io write(const char* from, std::size_t n, std::size_t& done) = 0;
  /// gRPC ended the connection and everything it sent was written: say goodbye if the protocol
  /// has a word for it (TLS's close_notify). Best effort; the socket closes next.
  virtual void closing() noexcept {}
  /// The socket.
  [[nodiscard]] virtual int fd() const noexcept = 0;
};

/// A connected, non-blocking socket, closed by the destructor.
class socket_transport final : public peer_transport {
 public:
  explicit socket_transport(int fd) noexcept : fd_(fd) {}
  socket_transport(const socket_transport&) = delete;
  socket_transport& operator=(const socket_transport&) = delete;
  ~socket_transport() override;

  [[nodiscard]] io read(char* to, std::size_t n, std::size_t& done) override;
  [[nodiscard]] io write(const char* from, std::size_t n, std::size_t& done) override;
  [[nodiscard]] int fd() const noexcept override { return fd_; }

 private:
  int fd_;
};

}  // namespace uma::detail
