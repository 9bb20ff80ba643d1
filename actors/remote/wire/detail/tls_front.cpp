#include <uma/actors/remote/wire/detail/tls_front.hpp>

#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include <uma/actors/remote/wire/detail/epoll_watch.hpp>
#include <uma/sys/error.hpp>

namespace uma::detail {

namespace {

using clock_type = std::chrono::steady_clock;

[[noreturn]] void cannot_listen(const std::string& address, std::uint16_t port,
                                const std::string& why) {
  raise(errc::backend_error,
        "cannot listen on " + address + ":" + std::to_string(port) + " (" + why + ")");
}

/// A listening, non-blocking TCP socket on `address`:`port`; `port` becomes the port bound.
[[nodiscard]] int listen_tcp(const std::string& address, std::uint16_t& port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 ||
      found == nullptr)
    cannot_listen(address, port, "not an address of this host");
  const std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, &::freeaddrinfo);
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (fd < 0 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      ::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0)
      ::close(fd);
    cannot_listen(address, port, why + ": in use, or not an address of this host");
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  char service[NI_MAXSERV] = {};
  ::getnameinfo(reinterpret_cast<sockaddr*>(&bound), len, nullptr, 0, service, sizeof service,
                NI_NUMERICSERV);
  port = static_cast<std::uint16_t>(std::atoi(service));
  return fd;
}

/// The numeric text of a peer's address, without the port: what the cap per address counts.
[[nodiscard]] std::string address_text(const sockaddr_storage& addr, socklen_t len) {
  char host[NI_MAXHOST] = {};
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof host, nullptr, 0,
                    NI_NUMERICHOST) != 0)
    return "?";
  return host;
}

}  // namespace

tls_front::tls_front(const std::string& address, std::uint16_t port, std::shared_ptr<SSL_CTX> ctx,
                     tls_front_limits limits, peer_table& table, connection_guards& guards, hooks h,
                     std::atomic<std::uint64_t>& refused)
    : limits_(limits),
      table_(table),
      guards_(guards),
      hooks_(std::move(h)),
      refused_(refused),
      ctx_(std::move(ctx)) {
  port_ = port;
  listen_fd_ = listen_tcp(address, port_);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0 || ::pipe2(wake_, O_CLOEXEC) != 0 ||
      !watch(epoll_fd_, listen_fd_, EPOLLIN | EPOLLET) || !watch(epoll_fd_, wake_[0], EPOLLIN)) {
    const std::string why = std::strerror(errno);
    for (const int fd : {listen_fd_, epoll_fd_, wake_[0], wake_[1]})
      if (fd >= 0)
        ::close(fd);
    cannot_listen(address, port, why);
  }
  thread_ = std::thread([this] { run(); });
}

tls_front::~tls_front() {
  const char stop = 1;
  static_cast<void>(::write(wake_[1], &stop, 1));
  thread_.join();
  handshaking_.clear();
  by_fd_.clear();  // closes every connection
  ::close(listen_fd_);
  ::close(epoll_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void tls_front::use(std::shared_ptr<SSL_CTX> ctx) {
  std::lock_guard lock(ctx_mutex_);
  ctx_ = std::move(ctx);
}

void tls_front::run() {
  // OpenSSL writes to the peer's socket with write(), not send(MSG_NOSIGNAL): a peer that reset
  // its connection would raise SIGPIPE, whose default ends the process. Blocked in this thread
  // (the signal a write raises goes to the writing thread), the write fails with EPIPE instead
  // and the connection ends.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  std::array<epoll_event, 64> events{};
  while (true) {
    const int n =
        ::epoll_wait(epoll_fd_, events.data(), events.size(), again_.empty() ? wait_ms() : 0);
    if (n < 0 && errno != EINTR)
      return;
    for (int i = 0; i < n; ++i) {
      const int fd = events[static_cast<std::size_t>(i)].data.fd;
      if (fd == wake_[0])
        return;
      if (fd == listen_fd_) {
        accept_all();
        continue;
      }
      if (const auto it = by_fd_.find(fd); it != by_fd_.end())
        on_ready(handle(it->second));  // a copy: `drop` erases the entry
    }
    for (const auto& c : std::exchange(again_, {}))
      if (c->pipe)  // not dropped since
        pump(c);
    expire_handshakes();
  }
}

int tls_front::wait_ms() const {
  if (handshaking_.empty())
    return -1;
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(handshaking_.begin()->first - clock_type::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, INT32_MAX));
}

void tls_front::refuse(const std::string& why) {
  ++refused_;
  if (hooks_.log)
    hooks_.log(why);
}

void tls_front::accept_all() {
  while (true) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EMFILE || errno == ENFILE ||
                   errno == ENOBUFS || errno == ENOMEM))
      return;  // all taken; or out of descriptors: the rest wait for the next arrival
    if (fd < 0)
      continue;  // that one went away before it was taken (ECONNABORTED, ...): the next
    auto address = address_text(addr, len);
    if (const auto it = per_address_.find(address); it != per_address_.end() &&
                                                    it->second >= limits_.per_address &&
                                                    !evict_silent_handshake(address)) {
      ::close(fd);
      refuse("refused a TCP connection from " + address + ": it has " +
             std::to_string(limits_.per_address) +
             " TLS handshakes under way, the cap per address, and none of them silent");
      continue;
    }
    if (open_ >= limits_.total) {
      ::close(fd);
      refuse("refused a TCP connection from " + address + ": " + std::to_string(open_) +
             " are open, the cap of the TCP listener");
      continue;
    }
    ++open_;
    ++per_address_[address];
    auto c = std::make_shared<connection>();
    {
      std::lock_guard lock(ctx_mutex_);
      auto tls = std::make_unique<tls_transport>(fd, ctx_.get());
      c->tls = tls.get();
      c->pipe = std::make_unique<guarded_pipe>(std::move(tls));
    }
    c->address = std::move(address);
    c->deadline = clock_type::now() + limits_.handshake_timeout;
    by_fd_.emplace(fd, c);
    handshaking_.emplace(c->deadline, c);
    if (!watch(epoll_fd_, fd, both_ways))
      drop(c);
  }
}

void tls_front::on_ready(const handle& c) {
  if (c->identity.empty()) {
    switch (c->tls->handshake()) {
      case tls_transport::progress::pending:
        return;
      case tls_transport::progress::failed:
        return drop(c);
      case tls_transport::progress::done:
        return finish_handshake(c);
    }
  }
  pump(c);
}

void tls_front::pump(const handle& c) {
  const auto flow = guards_.pump(*c->pipe, c->identity, hooks_.log);
  if (flow == guarded_pipe::flow::more)
    again_.push_back(c);
  else if (flow == guarded_pipe::flow::ended)
    drop(c);
}

void tls_front::end_handshake(const handle& c) {
  const auto range = handshaking_.equal_range(c->deadline);
  for (auto it = range.first; it != range.second; ++it)
    if (it->second == c) {
      handshaking_.erase(it);
      if (const auto a = per_address_.find(c->address); a != per_address_.end() && --a->second == 0)
        per_address_.erase(a);
      return;
    }
}

bool tls_front::evict_silent_handshake(const std::string& address) {
  for (const auto& [deadline, c] : handshaking_)
    if (c->address == address && !c->tls->heard()) {
      const auto victim = c;  // a copy: `drop` erases the entry
      refuse("closed a silent TCP connection from " + address +
             " (not a byte of TLS yet) to make room for a new one");
      drop(victim);
      return true;
    }
  return false;
}

void tls_front::finish_handshake(const handle& c) {
  end_handshake(c);
  const auto name = c->tls->common_name();
  if (name.empty()) {
    refuse("refused a TCP connection from " + c->address +
           ": its certificate names no common name");
    return drop(c);
  }
  auto who = hooks_.identify(name);
  if (const auto it = per_identity_.find(who.tenant);
      it != per_identity_.end() && it->second >= limits_.per_identity) {
    refuse("refused a TCP connection of " + who.tenant + " from " + c->address + ": it has " +
           std::to_string(limits_.per_identity) + " open, the cap per identity");
    return drop(c);
  }
  if (const auto why = guards_.admit(who.tenant, connection_guards::clock_type::now());
      !why.empty()) {
    refuse("refused a TCP connection of " + who.tenant + " from " + c->address + ": " + why);
    return drop(c);
  }
  const int theirs = c->pipe->open_inner(guards_.make(who.tenant));
  struct stat st {};
  if (theirs < 0 || ::fstat(theirs, &st) != 0) {
    if (theirs >= 0)
      ::close(theirs);
    return drop(c);
  }
  c->identity = who.tenant;
  ++per_identity_[c->identity];
  table_.add(theirs, st.st_ino, std::move(who), std::nullopt);
  by_fd_.emplace(c->pipe->inner(), c);
  hooks_.hand_over(theirs);
  if (!watch(epoll_fd_, c->pipe->inner(), both_ways))
    return drop(c);
  pump(c);  // the client's first bytes may have come with its last handshake flight
}

void tls_front::drop(const handle& c) {
  if (!c->pipe)
    return;
  by_fd_.erase(c->pipe->peer().fd());
  by_fd_.erase(c->pipe->inner());
  end_handshake(c);
  --open_;
  if (const auto it = per_identity_.find(c->identity);
      !c->identity.empty() && it != per_identity_.end() && --it->second == 0)
    per_identity_.erase(it);
  c->pipe.reset();  // closes both sockets; epoll forgets them with the close
}

void tls_front::expire_handshakes() {
  const auto now = clock_type::now();
  while (!handshaking_.empty() && handshaking_.begin()->first <= now)
    drop(handle(handshaking_.begin()->second));
}

}  // namespace uma::detail
