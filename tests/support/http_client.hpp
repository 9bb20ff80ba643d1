#pragma once

// A minimal HTTP/1.1 client over POSIX sockets for the endpoint tests: raw bytes in, the
// response (or what arrived before the server closed) out. Every read has a deadline
// (SO_RCVTIMEO), so a test fails instead of hanging.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace uma::test {

/// A parsed response: status code, header block (lower-cased names are not guaranteed), body.
struct http_response {
  int status = 0;
  std::string head;
  std::string body;
};

/// One TCP connection to 127.0.0.1:port.
class http_connection {
 public:
  explicit http_connection(std::uint16_t port, int timeout_ms = 10'000) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0)
      throw std::runtime_error("socket failed");
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      throw std::runtime_error("connect to 127.0.0.1:" + std::to_string(port) + " failed");
    }
  }
  http_connection(const http_connection&) = delete;
  http_connection& operator=(const http_connection&) = delete;
  ~http_connection() { ::close(fd_); }

  /// Sends `bytes` whole; false when the peer refused them.
  bool send(const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const auto n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0)
        return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }

  /// Reads one response: the header, then Content-Length bytes of body (or up to EOF without
  /// one). Status 0 when nothing arrived before EOF or the deadline.
  http_response read_response() {
    while (buffer_.find("\r\n\r\n") == std::string::npos)
      if (!fill())
        return {};
    const auto end = buffer_.find("\r\n\r\n");
    http_response r;
    r.head = buffer_.substr(0, end);
    buffer_.erase(0, end + 4);
    r.status = std::stoi(r.head.substr(r.head.find(' ') + 1, 3));
    const auto at = r.head.find("Content-Length: ");
    if (at == std::string::npos) {
      while (fill()) {
      }
      r.body = std::move(buffer_);
      return r;
    }
    const auto length = std::stoul(r.head.substr(at + 16));
    while (buffer_.size() < length && fill()) {
    }
    r.body = buffer_.substr(0, length);
    buffer_.erase(0, length);
    return r;
  }

  /// True when the server closed the connection (EOF) before the deadline.
  bool closed_by_peer() {
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

 private:
  bool fill() {
    char chunk[4096];
    const auto n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0)
      return false;
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buffer_;
};

/// GET `target` on a fresh connection that the request closes.
inline http_response http_get(std::uint16_t port, const std::string& target) {
  http_connection c(port);
  c.send("GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  return c.read_response();
}

}  // namespace uma::test
