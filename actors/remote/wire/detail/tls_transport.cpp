#include <uma/actors/remote/wire/detail/tls_transport.hpp>

#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <uma/actors/remote/wire/detail/wire_tls.hpp>

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

tls_transport::tls_transport(int tcp, SSL_CTX* ctx) : tcp_(tcp), ssl_(SSL_new(ctx)) {
  if (ssl_ == nullptr || SSL_set_fd(ssl_, tcp_) != 1)
    broken_ = true;
  else
    SSL_set_accept_state(ssl_);
}

tls_transport::~tls_transport() {
  if (ssl_ != nullptr)
    SSL_free(ssl_);
  clear_errors();
  ::close(tcp_);
}

tls_transport::progress tls_transport::handshake() {
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

bool tls_transport::heard() const {
  const BIO* in = ssl_ != nullptr ? SSL_get_rbio(ssl_) : nullptr;
  return in != nullptr && BIO_number_read(const_cast<BIO*>(in)) > 0;
}

std::string tls_transport::common_name() const {
  return peer_common_name(ssl_);
}

peer_transport::io tls_transport::read(char* to, std::size_t n, std::size_t& done) {
  if (broken_)
    return io::ended;
  clear_errors();
  const int got = SSL_read(ssl_, to, static_cast<int>(n));
  if (got > 0) {
    done = static_cast<std::size_t>(got);
    return io::moved;
  }
  if (would_block(SSL_get_error(ssl_, got)))
    return io::blocked;
  clear_errors();  // close_notify, end of stream or a TLS error: the peer is gone
  return io::ended;
}

peer_transport::io tls_transport::write(const char* from, std::size_t n, std::size_t& done) {
  if (broken_)
    return io::ended;
  clear_errors();
  const int put = SSL_write(ssl_, from, static_cast<int>(n));
  if (put > 0) {
    done = static_cast<std::size_t>(put);
    return io::moved;
  }
  if (would_block(SSL_get_error(ssl_, put)))
    return io::blocked;
  clear_errors();
  return io::ended;
}

void tls_transport::closing() noexcept {
  if (broken_)
    return;
  clear_errors();
  static_cast<void>(SSL_shutdown(ssl_));
  clear_errors();
}

}  // namespace uma::detail
