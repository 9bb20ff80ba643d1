#pragma once

// The wire's TCP listener. uma owns the listening socket and terminates TLS itself (tls_transport),
// so that connections are counted where they can be refused: handshakes under way per remote
// address at accept, before a byte of TLS (past the cap, the oldest of the address's that has
// not sent a byte yet is closed to make room, and the new one is closed at once when there is
// none: silent connections cannot keep an address's clients out), and per certificate
// identity when the handshake ends, before gRPC sees a byte (the next one past the cap is closed
// then). An accepted connection reaches gRPC as a plain socket pair (AddInsecureChannelFromFd),
// recorded in the peer table under the certificate's identity like a Unix-socket connection.
// One thread runs it all on epoll; the TLS handshake has its own deadline. The credentials of new
// handshakes can be replaced while it runs (`use`); connections keep the ones they began with.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <openssl/types.h>

#include <uma/actors/remote/wire/detail/connection_guards.hpp>
#include <uma/actors/remote/wire/detail/guarded_pipe.hpp>
#include <uma/actors/remote/wire/detail/tls_transport.hpp>
#include <uma/actors/remote/wire/detail/unix_listener.hpp>

namespace uma::detail {

/// What bounds the front's connections.
struct tls_front_limits {
  std::uint32_t per_address = 32;   ///< TLS handshakes under way from one remote address
  std::uint32_t per_identity = 16;  ///< open connections of one certificate identity
  std::uint32_t total = 1024;       ///< open connections of every address together
  std::chrono::milliseconds handshake_timeout{5000};  ///< accept to the end of the TLS handshake
};

class tls_front {
 public:
  /// What the front needs from the wire server.
  struct hooks {
    /// The identity of a verified certificate's common name ("cert CN" or the operator).
    std::function<peer_identity(const std::string&)> identify;
    /// Hands gRPC's end of an accepted connection to the server.
    std::function<void(int)> hand_over;
    /// Refusals (may be empty).
    std::function<void(const std::string&)> log;
  };

  /// Binds `address`:`port` (0: a free port) and starts serving with `ctx`. Throws
  /// `error(backend_error)` naming the address when it cannot listen.
  tls_front(const std::string& address, std::uint16_t port, std::shared_ptr<SSL_CTX> ctx,
            tls_front_limits limits, peer_table& table, connection_guards& guards, hooks h,
            std::atomic<std::uint64_t>& refused);
  tls_front(const tls_front&) = delete;
  tls_front& operator=(const tls_front&) = delete;
  /// Stops accepting and closes every connection (gRPC sees each end).
  ~tls_front();

  /// The port bound.
  [[nodiscard]] std::uint16_t port() const noexcept { return port_; }
  /// Handshakes from now on use `ctx`; connections already accepted keep theirs.
  void use(std::shared_ptr<SSL_CTX> ctx);

 private:
  struct connection {
    std::unique_ptr<guarded_pipe> pipe;
    tls_transport* tls = nullptr;  // the pipe's peer
    std::string address;
    std::string identity;  // empty until the handshake ends
    std::chrono::steady_clock::time_point deadline;
  };
  using handle = std::shared_ptr<connection>;

  void run();
  void accept_all();
  void on_ready(const handle& c);
  /// Moves `c`'s bytes: drops it when it ended, queues it for the next round when its budget
  /// ran out with bytes still ready (edge-triggered epoll would not report them again).
  void pump(const handle& c);
  void finish_handshake(const handle& c);
  /// Takes `c` off the handshakes under way (its handshake ended either way): its address's slot
  /// frees.
  void end_handshake(const handle& c);
  /// Closes the oldest handshake under way from `address` that has not sent a byte; false when
  /// there is none.
  bool evict_silent_handshake(const std::string& address);
  void drop(const handle& c);
  void expire_handshakes();
  [[nodiscard]] int wait_ms() const;
  void refuse(const std::string& why);

  tls_front_limits limits_;
  peer_table& table_;
  connection_guards& guards_;
  hooks hooks_;
  std::atomic<std::uint64_t>& refused_;
  mutable std::mutex ctx_mutex_;
  std::shared_ptr<SSL_CTX> ctx_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::uint16_t port_ = 0;
  // Touched by the front's thread only.
  std::map<int, handle> by_fd_;  // both descriptors of each connection
  std::multimap<std::chrono::steady_clock::time_point, handle> handshaking_;
  std::vector<handle> again_;                         // connections to pump in the next round
  std::map<std::string, std::uint32_t> per_address_;  // handshakes under way
  std::map<std::string, std::uint32_t> per_identity_;
  std::uint32_t open_ = 0;
  std::thread thread_;
};

}  // namespace uma::detail
