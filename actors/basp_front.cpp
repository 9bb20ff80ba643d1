#include <uma/actors/basp_front.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <thread>
#include <utility>
#include <vector>

#include <uma/sys/error.hpp>

namespace uma {

namespace {

constexpr std::size_t basp_header_size = 32;               // caf::io::basp::header_size in CAF 0.17
constexpr std::size_t max_pending = std::size_t{1} << 20;  // per direction, then stop reading
constexpr unsigned char client_handshake = 0x01;
constexpr unsigned char routed_message = 0x03;
constexpr unsigned char last_operation = 0x06;  // heartbeat

using clock = std::chrono::steady_clock;

/// The BASP framing of what one peer sends: where the next header starts.
struct basp_parser {
  unsigned char header[basp_header_size] = {};
  std::size_t have = 0;
  std::uint64_t payload_left = 0;
  bool first = true;

  /// Consumes `n` bytes; returns why the stream is not acceptable BASP, or an empty string.
  std::string feed(const unsigned char* p, std::size_t n, std::uint32_t max_payload) {
    while (n > 0) {
      if (payload_left > 0) {
        const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(payload_left, n));
        payload_left -= take;
        p += take;
        n -= take;
        continue;
      }
      const auto take = std::min(basp_header_size - have, n);
      std::memcpy(header + have, p, take);
      have += take;
      p += take;
      n -= take;
      if (have < basp_header_size)
        break;
      have = 0;
      if (auto why = check_header(max_payload); !why.empty())
        return why;
    }
    return {};
  }

  std::string check_header(std::uint32_t max_payload) {
    const unsigned op = header[0];
    const std::uint32_t len = (std::uint32_t{header[4]} << 24) | (std::uint32_t{header[5]} << 16) |
                              (std::uint32_t{header[6]} << 8) | std::uint32_t{header[7]};
    const bool was_first = std::exchange(first, false);
    if (op == 0 || op > last_operation)
      return "BASP operation " + std::to_string(op) + " is not one a peer sends (not BASP?)";
    if (was_first && op != client_handshake)
      return "the first BASP message is operation " + std::to_string(op) +
             ", not a client handshake";
    if (op == routed_message)
      return "routed BASP messages are refused (peers talk to this node directly)";
    if (len > max_payload)
      return "a BASP header announces " + std::to_string(len) + " payload bytes, over the cap of " +
             std::to_string(max_payload);
    payload_left = len;
    return {};
  }
};

struct connection {
  int client = -1;
  int upstream = -1;
  std::string peer;
  std::vector<unsigned char> to_upstream, to_client;
  basp_parser parser;
  clock::time_point last_in = clock::now();
};

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

[[nodiscard]] std::string peer_name(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  std::uint16_t port = 0;
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, host, sizeof host);
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof host);
    port = ntohs(v6.sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

[[nodiscard]] int listen_on(const std::string& bind, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const auto service = std::to_string(port);
  const std::string host =
      bind.size() > 2 && bind.front() == '[' ? bind.substr(1, bind.size() - 2) : bind;
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    raise(errc::backend_error, "basp front: cannot resolve " + bind + ": " + ::gai_strerror(rc));
  int fd = -1;
  std::string why = "no address";
  for (auto* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    const int one = 1;
    if (fd >= 0 && (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
                    ::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 128) != 0)) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0)
    raise(errc::backend_error,
          "basp front: cannot listen on " + bind + ":" + std::to_string(port) + ": " + why);
  set_nonblocking(fd);
  return fd;
}

[[nodiscard]] int connect_upstream(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    set_nonblocking(fd);
    return fd;
  }
  if (fd >= 0)
    ::close(fd);
  return -1;
}

/// Writes what `pending` holds to `fd`; false when the connection is broken.
[[nodiscard]] bool flush(int fd, std::vector<unsigned char>& pending) {
  if (pending.empty())
    return true;
  const auto n = ::send(fd, pending.data(), pending.size(), MSG_NOSIGNAL);
  if (n < 0)
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  pending.erase(pending.begin(), pending.begin() + n);
  return true;
}

enum class read_result { ok, closed, violation };

}  // namespace

struct basp_front::impl {
  basp_front_config cfg;
  std::uint16_t upstream_port = 0;
  std::uint16_t port = 0;
  int listener = -1;
  int wake[2] = {-1, -1};
  std::atomic<std::uint64_t> violations{0};
  std::list<connection> conns;
  std::thread thread;

  void log(const std::string& line) const {
    if (cfg.log)
      cfg.log(line);
  }

  void drop(std::list<connection>::iterator it, const std::string& why) {
    if (!why.empty())
      log("dropped " + it->peer + ": " + why);
    ::close(it->client);
    ::close(it->upstream);
    conns.erase(it);
  }

  void accept_one() {
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    const int fd =
        ::accept4(listener, reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return;
    const auto peer = peer_name(from);
    if (conns.size() >= cfg.max_connections) {
      log("refused " + peer + ": " + std::to_string(conns.size()) + " connections open, the cap");
      ::close(fd);
      return;
    }
    const int up = connect_upstream(upstream_port);
    if (up < 0) {
      log("refused " + peer + ": the middleman's port does not answer");
      ::close(fd);
      return;
    }
    auto& c = conns.emplace_back();
    c.client = fd;
    c.upstream = up;
    c.peer = peer;
  }

  read_result read_client(connection& c, std::string& why) {
    unsigned char buf[65536];
    const auto n = ::recv(c.client, buf, sizeof buf, 0);
    if (n < 0)
      return errno == EAGAIN || errno == EINTR ? read_result::ok : read_result::closed;
    if (n == 0)
      return read_result::closed;
    c.last_in = clock::now();
    if (cfg.parse_basp)
      why = c.parser.feed(buf, static_cast<std::size_t>(n), cfg.max_payload);
    if (!why.empty())
      return read_result::violation;
    c.to_upstream.insert(c.to_upstream.end(), buf, buf + n);
    return read_result::ok;
  }

  [[nodiscard]] bool read_upstream(connection& c) {
    unsigned char buf[65536];
    const auto n = ::recv(c.upstream, buf, sizeof buf, 0);
    if (n < 0)
      return errno == EAGAIN || errno == EINTR;
    if (n == 0) {
      static_cast<void>(flush(c.client, c.to_client));
      log("the middleman closed the connection of " + c.peer +
          (cfg.parse_basp ? std::string{}
                          : " (with TLS, a peer whose certificate is refused or that speaks no "
                            "TLS ends so)"));
      return false;
    }
    c.to_client.insert(c.to_client.end(), buf, buf + n);
    return true;
  }

  /// One connection's poll results; false when it was dropped.
  bool serve(std::list<connection>::iterator it, short client_ev, short upstream_ev) {
    auto& c = *it;
    std::string why;
    if (client_ev & (POLLIN | POLLHUP | POLLERR)) {
      const auto r = read_client(c, why);
      if (r == read_result::violation) {
        violations.fetch_add(1, std::memory_order_relaxed);
        drop(it, why);
        return false;
      }
      if (r == read_result::closed) {
        drop(it, {});
        return false;
      }
    }
    if ((upstream_ev & (POLLIN | POLLHUP | POLLERR)) && !read_upstream(c)) {
      drop(it, {});
      return false;
    }
    if (!flush(c.upstream, c.to_upstream) || !flush(c.client, c.to_client)) {
      drop(it, {});
      return false;
    }
    if (cfg.idle_timeout.count() > 0 && clock::now() - c.last_in > cfg.idle_timeout) {
      drop(it, "idle for more than " + std::to_string(cfg.idle_timeout.count()) + " ms");
      return false;
    }
    return true;
  }

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.assign({{wake[0], POLLIN, 0}, {listener, POLLIN, 0}});
      for (const auto& c : conns) {
        fds.push_back({c.client,
                       static_cast<short>((c.to_upstream.size() < max_pending ? POLLIN : 0) |
                                          (c.to_client.empty() ? 0 : POLLOUT)),
                       0});
        fds.push_back({c.upstream,
                       static_cast<short>((c.to_client.size() < max_pending ? POLLIN : 0) |
                                          (c.to_upstream.empty() ? 0 : POLLOUT)),
                       0});
      }
      if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR)
        return;
      if (fds[0].revents != 0)
        return;
      std::size_t i = 2;
      for (auto it = conns.begin(); it != conns.end(); i += 2) {
        auto next = std::next(it);
        static_cast<void>(serve(it, fds[i].revents, fds[i + 1].revents));
        it = next;
      }
      if (fds[1].revents & POLLIN)
        accept_one();
    }
  }
};

basp_front::basp_front(const std::string& bind, std::uint16_t port, std::uint16_t upstream_port,
                       basp_front_config config)
    : impl_(std::make_unique<impl>()) {
  impl_->cfg = std::move(config);
  impl_->upstream_port = upstream_port;
  impl_->listener = listen_on(bind, port);
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  ::getsockname(impl_->listener, reinterpret_cast<sockaddr*>(&a), &len);
  impl_->port = ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(a).sin6_port
                                              : reinterpret_cast<sockaddr_in&>(a).sin_port);
  if (::pipe2(impl_->wake, O_CLOEXEC) != 0) {
    ::close(impl_->listener);
    raise(errc::backend_error, std::string("basp front: pipe2 failed: ") + std::strerror(errno));
  }
  impl_->thread = std::thread([p = impl_.get()] { p->run(); });
}

basp_front::~basp_front() {
  const char stop = 1;
  static_cast<void>(::write(impl_->wake[1], &stop, 1));
  impl_->thread.join();
  while (!impl_->conns.empty())
    impl_->drop(impl_->conns.begin(), {});
  ::close(impl_->listener);
  ::close(impl_->wake[0]);
  ::close(impl_->wake[1]);
}

std::uint16_t basp_front::port() const noexcept {
  return impl_->port;
}

std::uint64_t basp_front::violations() const noexcept {
  return impl_->violations.load(std::memory_order_relaxed);
}

}  // namespace uma
