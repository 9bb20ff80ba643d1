#pragma once

// One connection through uma's front: the peer (its socket, or TLS over it: peer_transport) on
// one side, gRPC's end of a socket pair on the other (AddInsecureChannelFromFd), the bytes moved
// both ways by the front's thread and read on their way by the connection's frame guard, which
// ends the connection when the peer goes past a bound (frame_guard.hpp). Both sockets are
// non-blocking: the front calls `pump` whenever either is ready, and it never waits.

#include <array>
#include <cstddef>
#include <memory>

#include <uma/actors/remote/wire/detail/frame_guard.hpp>
#include <uma/actors/remote/wire/detail/peer_transport.hpp>

namespace uma::detail {

class guarded_pipe {
 public:
  /// Takes the peer's transport (whose socket the pipe then owns).
  explicit guarded_pipe(std::unique_ptr<peer_transport> peer) noexcept;
  guarded_pipe(const guarded_pipe&) = delete;
  guarded_pipe& operator=(const guarded_pipe&) = delete;
  /// Closes both sockets: gRPC sees its end close and ends the connection's calls.
  ~guarded_pipe();

  /// Makes the socket pair, its bytes read by `guard` from now on: returns gRPC's end (which
  /// gRPC then owns), or -1 when the process is out of descriptors.
  [[nodiscard]] int open_inner(std::unique_ptr<frame_guard> guard);

  enum class flow {
    waiting,  ///< nothing more moves until a socket is ready again
    more,     ///< the round's budget is spent and bytes are still ready: pump again soon
    ended     ///< either side closed (after what it sent was passed on) or failed, or the
              ///< guard refused the peer (`refused` says why)
  };
  /// Moves bytes both ways until nothing more moves, or at most `rounds` buffers each way (so
  /// that one busy connection cannot keep the front from the others).
  [[nodiscard]] flow pump(int rounds = 64);
  /// Why the guard ended the connection (`none` if it did not).
  [[nodiscard]] guard_reason refused() const noexcept { return refused_; }

  [[nodiscard]] peer_transport& peer() noexcept { return *peer_; }
  [[nodiscard]] int inner() const noexcept { return inner_; }

 private:
  /// A direction's bytes read but not yet written.
  struct buffer {
    std::array<char, 16384> bytes{};
    std::size_t begin = 0;
    std::size_t end = 0;
    [[nodiscard]] bool empty() const noexcept { return begin == end; }
  };
  bool peer_to_inner();
  bool inner_to_peer();

  std::unique_ptr<peer_transport> peer_;
  std::unique_ptr<frame_guard> guard_;
  int inner_ = -1;
  buffer from_peer_;
  buffer from_inner_;
  bool peer_ended_ = false;
  bool inner_ended_ = false;
  bool broken_ = false;
  guard_reason refused_ = guard_reason::none;
};

}  // namespace uma::detail
