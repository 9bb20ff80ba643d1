// The length-checking TCP front of `uma serve` (actors/basp_front.hpp) against a plain upstream
// socket on 127.0.0.1: what it forwards, what makes it close a connection, and its limits.

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <uma/actors/basp_front.hpp>

namespace uma {
namespace {

using namespace std::chrono_literals;

/// A loopback TCP socket: a listener (port 0) or a client connected to `port`.
int tcp(std::uint16_t port, bool listen) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int rc = listen ? ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) | ::listen(fd, 16)
                        : ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  EXPECT_EQ(rc, 0) << std::strerror(errno);
  return fd;
}

std::uint16_t port_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

/// Reads from `fd` until `n` bytes came, the peer closed, or `limit` passed; returns them.
std::string read_some(int fd, std::size_t n, std::chrono::milliseconds limit) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (out.size() < n && std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0)
      continue;
    char buf[4096];
    const auto got = ::recv(fd, buf, sizeof buf, 0);
    if (got <= 0)
      break;
    out.append(buf, static_cast<std::size_t>(got));
  }
  return out;
}

/// True when the peer of `fd` closed it within `limit`.
bool closed_by_peer(int fd, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0)
      continue;
    char buf[4096];
    const auto got = ::recv(fd, buf, sizeof buf, 0);
    if (got == 0 || (got < 0 && errno == ECONNRESET))
      return true;
  }
  return false;
}

/// A 32-byte BASP header: operation, payload_len (big endian).
std::string header(unsigned char op, std::uint32_t len) {
  std::string h(32, '\0');
  h[0] = static_cast<char>(op);
  for (int i = 0; i < 4; ++i)
    h[4 + i] = static_cast<char>((len >> (24 - 8 * i)) & 0xff);
  return h;
}

class basp_front_test : public ::testing::Test {
 protected:
  void start(basp_front_config cfg) {
    cfg.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> guard{mutex_};
      log_.push_back(line);
    };
    front_ = std::make_unique<basp_front>("127.0.0.1", 0, port_of(upstream_), std::move(cfg));
  }

  void TearDown() override {
    front_.reset();
    for (const int fd : fds_)
      ::close(fd);
    ::close(upstream_);
  }

  /// A client of the front and the upstream end the front opened for it.
  std::pair<int, int> connect_pair() {
    const int c = tcp(front_->port(), false);
    const int u = ::accept(upstream_, nullptr, nullptr);
    fds_.insert(fds_.end(), {c, u});
    return {c, u};
  }

  std::string log_text() {
    std::lock_guard<std::mutex> guard{mutex_};
    std::string out;
    for (const auto& l : log_)
      out += l + "\n";
    return out;
  }

  int upstream_ = tcp(0, true);
  std::unique_ptr<basp_front> front_;
  std::vector<int> fds_;
  std::mutex mutex_;
  std::vector<std::string> log_;
};

TEST_F(basp_front_test, WellFramedMessagesPassBothWays) {
  start({.max_payload = 1024});
  auto [c, u] = connect_pair();
  const auto msg = header(0x01, 5) + "hello" + header(0x02, 0);
  ASSERT_EQ(::send(c, msg.data(), msg.size(), 0), static_cast<ssize_t>(msg.size()));
  EXPECT_EQ(read_some(u, msg.size(), 5s), msg);
  ASSERT_EQ(::send(u, "reply", 5, 0), 5);
  EXPECT_EQ(read_some(c, 5, 5s), "reply");
  EXPECT_EQ(front_->violations(), 0u);
}

TEST_F(basp_front_test, AHeaderOverTheCapClosesTheConnectionBeforeItIsForwarded) {
  start({.max_payload = 1024});
  auto [c, u] = connect_pair();
  const auto msg = header(0x01, 1u << 30);
  ASSERT_EQ(::send(c, msg.data(), msg.size(), 0), 32);
  EXPECT_TRUE(closed_by_peer(c, 5s));
  EXPECT_EQ(read_some(u, 1, 200ms), "");  // not one byte of it reached the middleman
  EXPECT_EQ(front_->violations(), 1u);
  EXPECT_NE(log_text().find("announces 1073741824 payload bytes, over the cap of 1024"),
            std::string::npos)
      << log_text();
}

TEST_F(basp_front_test, RoutedMessagesGarbageAndAMissingHandshakeAreRefused) {
  start({});
  for (const auto& msg :
       {header(0x01, 0) + header(0x03, 8), header(0x02, 0), std::string(32, '\xff')}) {
    auto [c, u] = connect_pair();
    static_cast<void>(u);
    ASSERT_EQ(::send(c, msg.data(), msg.size(), 0), static_cast<ssize_t>(msg.size()));
    EXPECT_TRUE(closed_by_peer(c, 5s));
  }
  EXPECT_EQ(front_->violations(), 3u);
  const auto text = log_text();
  EXPECT_NE(text.find("routed BASP messages are refused"), std::string::npos) << text;
  EXPECT_NE(text.find("not a client handshake"), std::string::npos) << text;
  EXPECT_NE(text.find("BASP operation 255 is not one a peer sends"), std::string::npos) << text;
}

TEST_F(basp_front_test, IdleAndSurplusConnectionsAreClosed) {
  start({.idle_timeout = 200ms, .max_connections = 2});
  auto first = connect_pair();
  auto second = connect_pair();
  const int third = tcp(front_->port(), false);
  fds_.push_back(third);
  EXPECT_TRUE(closed_by_peer(third, 5s));        // over the cap: closed at once
  EXPECT_TRUE(closed_by_peer(first.first, 5s));  // idle
  EXPECT_TRUE(closed_by_peer(second.first, 5s));
  const auto text = log_text();
  EXPECT_NE(text.find("2 connections open, the cap"), std::string::npos) << text;
  EXPECT_NE(text.find("idle for more than 200 ms"), std::string::npos) << text;
}

}  // namespace
}  // namespace uma
