#include <uma/actors/remote/wire/detail/guarded_pipe.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace uma::detail {

guarded_pipe::guarded_pipe(std::unique_ptr<peer_transport> peer) noexcept
    : peer_(std::move(peer)) {}

guarded_pipe::~guarded_pipe() {
  if (inner_ >= 0)
    ::close(inner_);
}

int guarded_pipe::open_inner(std::unique_ptr<frame_guard> guard) {
  int pair[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0)
    return -1;
  guard_ = std::move(guard);
  inner_ = pair[0];
  return pair[1];
}

/// One step from the peer to gRPC: read when the buffer is empty (the guard reads it first),
/// write what the buffer holds. True when a byte moved.
bool guarded_pipe::peer_to_inner() {
  bool moved = false;
  auto& b = from_peer_;
  if (b.empty() && !peer_ended_) {
    b.begin = b.end = 0;
    std::size_t n = 0;
    switch (peer_->read(b.bytes.data(), b.bytes.size(), n)) {
      case peer_transport::io::moved:
        refused_ =
            guard_->from_peer(std::string_view(b.bytes.data(), n), frame_guard::clock_type::now());
        if (refused_ != guard_reason::none) {
          broken_ = true;  // not a byte of it reaches gRPC
          return true;
        }
        b.end = n;
        moved = true;
        break;
      case peer_transport::io::blocked:
        break;
      case peer_transport::io::ended:
        peer_ended_ = true;
        break;
    }
  }
  if (!b.empty()) {
    const auto n = ::send(inner_, b.bytes.data() + b.begin, b.end - b.begin, MSG_NOSIGNAL);
    if (n > 0) {
      b.begin += static_cast<std::size_t>(n);
      moved = true;
    } else if (errno != EAGAIN && errno != EINTR) {
      broken_ = true;
    }
  }
  return moved;
}

/// One step from gRPC to the peer: read when the buffer is empty (the guard sees the streams
/// gRPC ends), write what it holds.
bool guarded_pipe::inner_to_peer() {
  bool moved = false;
  auto& b = from_inner_;
  if (b.empty() && !inner_ended_) {
    b.begin = b.end = 0;
    const auto n = ::recv(inner_, b.bytes.data(), b.bytes.size(), 0);
    if (n > 0) {
      b.end = static_cast<std::size_t>(n);
      guard_->from_server(std::string_view(b.bytes.data(), b.end));
      moved = true;
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      inner_ended_ = true;  // gRPC closed the connection (idle, keepalive, shutdown)
    }
  }
  if (!b.empty()) {
    std::size_t n = 0;
    switch (peer_->write(b.bytes.data() + b.begin, b.end - b.begin, n)) {
      case peer_transport::io::moved:
        b.begin += n;
        moved = true;
        break;
      case peer_transport::io::blocked:
        break;
      case peer_transport::io::ended:
        broken_ = true;
        break;
    }
  }
  return moved;
}

guarded_pipe::flow guarded_pipe::pump(int rounds) {
  if (inner_ < 0)
    return flow::ended;
  bool moved = true;
  for (; moved && !broken_ && rounds > 0; --rounds) {
    const bool in = peer_to_inner();
    const bool out = inner_to_peer();
    moved = in || out;
  }
  if (broken_ || (peer_ended_ && from_peer_.empty()))
    return flow::ended;
  if (inner_ended_ && from_inner_.empty()) {
    peer_->closing();
    return flow::ended;
  }
  return moved ? flow::more : flow::waiting;
}

}  // namespace uma::detail
