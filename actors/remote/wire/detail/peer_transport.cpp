#include <uma/actors/remote/wire/detail/peer_transport.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace uma::detail {

socket_transport::~socket_transport() {
  ::close(fd_);
}

peer_transport::io socket_transport::read(char* to, std::size_t n, std::size_t& done) {
  const auto got = ::recv(fd_, to, n, 0);
  if (got > 0) {
    done = static_cast<std::size_t>(got);
    return io::moved;
  }
  return got < 0 && (errno == EAGAIN || errno == EINTR) ? io::blocked : io::ended;
}

peer_transport::io socket_transport::write(const char* from, std::size_t n, std::size_t& done) {
  const auto put = ::send(fd_, from, n, MSG_NOSIGNAL);
  if (put > 0) {
    done = static_cast<std::size_t>(put);
    return io::moved;
  }
  return put < 0 && (errno == EAGAIN || errno == EINTR) ? io::blocked : io::ended;
}

}  // namespace uma::detail
