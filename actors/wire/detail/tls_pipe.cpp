#include <uma/actors/wire/detail/tls_pipe.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <uma/actors/wire/detail/wire_tls.hpp>

namespace uma::detail {

namespace {

[[nodiscard]] bool would_block(int e) {
  return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
}

/// OpenSSL's error queue is per thread and the front's thread serves every connection: an error
/// one connection left there would make SSL_get_error misread another's "would block" as a
/// failure. So it is emptied before every TLS operation, and after each that fails.
void clear_errors() {
  ERR_clear_error();
}

}  // namespace

tls_pipe::tls_pipe(int tcp, SSL_CTX* ctx) : tcp_(tcp), ssl_(SSL_new(ctx)) {
  if (ssl_ == nullptr || SSL_set_fd(ssl_, tcp_) != 1)
    broken_ = true;
  else
    SSL_set_accept_state(ssl_);
}

tls_pipe::~tls_pipe() {
  if (ssl_ != nullptr)
    SSL_free(ssl_);
  clear_errors();
  ::close(tcp_);
  if (inner_ >= 0)
    ::close(inner_);
}

tls_pipe::progress tls_pipe::handshake() {
  if (broken_)
    return progress::failed;
  clear_errors();
  const int r = SSL_do_handshake(ssl_);
  if (r == 1)
    return progress::done;
  const bool pending = would_block(SSL_get_error(ssl_, r));
  clear_errors();
  return pending ? progress::pending : progress::failed;
}

std::string tls_pipe::common_name() const {
  return peer_common_name(ssl_);
}

int tls_pipe::open_inner() {
  int pair[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0)
    return -1;
  inner_ = pair[0];
  return pair[1];
}

/// One step from the peer's TLS to gRPC: decrypt a record when the buffer is empty, write what
/// the buffer holds. True when a byte moved.
bool tls_pipe::tls_to_inner() {
  bool moved = false;
  auto& b = from_tls_;
  if (b.empty() && !tls_ended_) {
    b.begin = b.end = 0;
    clear_errors();
    const int n = SSL_read(ssl_, b.bytes.data(), static_cast<int>(b.bytes.size()));
    if (n > 0) {
      b.end = static_cast<std::size_t>(n);
      moved = true;
    } else if (!would_block(SSL_get_error(ssl_, n))) {
      tls_ended_ = true;  // close_notify, end of stream or a TLS error: the peer is gone
      clear_errors();
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

/// One step from gRPC to the peer: read when the buffer is empty, encrypt what it holds.
bool tls_pipe::inner_to_tls() {
  bool moved = false;
  auto& b = from_inner_;
  if (b.empty() && !inner_ended_) {
    b.begin = b.end = 0;
    const auto n = ::recv(inner_, b.bytes.data(), b.bytes.size(), 0);
    if (n > 0) {
      b.end = static_cast<std::size_t>(n);
      moved = true;
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      inner_ended_ = true;  // gRPC closed the connection (idle, keepalive, shutdown)
    }
  }
  if (!b.empty()) {
    // A retry after WANT_WRITE passes the same bytes again, as SSL_write requires.
    clear_errors();
    const int n = SSL_write(ssl_, b.bytes.data() + b.begin, static_cast<int>(b.end - b.begin));
    if (n > 0) {
      b.begin += static_cast<std::size_t>(n);
      moved = true;
    } else if (!would_block(SSL_get_error(ssl_, n))) {
      broken_ = true;
      clear_errors();
    }
  }
  return moved;
}

tls_pipe::flow tls_pipe::pump(int rounds) {
  if (inner_ < 0)
    return flow::ended;
  bool moved = true;
  for (; moved && !broken_ && rounds > 0; --rounds) {
    const bool in = tls_to_inner();
    const bool out = inner_to_tls();
    moved = in || out;
  }
  if (broken_ || (tls_ended_ && from_tls_.empty()))
    return flow::ended;
  if (inner_ended_ && from_inner_.empty()) {
    clear_errors();
    static_cast<void>(SSL_shutdown(ssl_));  // close_notify, best effort: the socket closes next
    clear_errors();
    return flow::ended;
  }
  return moved ? flow::more : flow::waiting;
}

}  // namespace uma::detail
