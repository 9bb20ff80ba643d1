#include <uma/actors/remote/wire/detail/unix_listener.hpp>

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

#include <uma/actors/remote/wire/detail/epoll_watch.hpp>
#include <uma/sys/error.hpp>

namespace uma::detail {

void peer_table::add(int fd, ino_t inode, peer_identity who, std::optional<uid_t> uid) {
  std::lock_guard lock(mutex_);
  entries_.insert_or_assign(fd, entry{inode, std::move(who), uid});
}

void peer_table::remove(int fd, ino_t inode) {
  std::lock_guard lock(mutex_);
  if (const auto it = entries_.find(fd); it != entries_.end() && it->second.inode == inode)
    entries_.erase(it);
}

std::optional<peer_identity> peer_table::find(int fd) const {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(fd);
  struct stat st {};
  if (it == entries_.end() || ::fstat(fd, &st) != 0 || st.st_ino != it->second.inode)
    return std::nullopt;
  return it->second.who;
}

std::uint32_t peer_table::live_of(uid_t uid, bool operator_socket) {
  std::lock_guard lock(mutex_);
  std::uint32_t n = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    struct stat st {};
    if (::fstat(it->first, &st) != 0 || st.st_ino != it->second.inode) {
      it = entries_.erase(it);
      continue;
    }
    n += it->second.uid == uid && it->second.who.is_operator == operator_socket ? 1 : 0;
    ++it;
  }
  return n;
}

namespace {

[[noreturn]] void fail(const std::string& path, const char* what) {
  raise(errc::backend_error,
        "cannot listen on unix:" + path + ": " + what + ": " + std::strerror(errno));
}

/// True when a server accepts connections at `addr` (a connection is made, or its backlog is
/// full); false when nobody listens there (the file of a server that is gone).
[[nodiscard]] bool someone_listens(const sockaddr_un& addr) {
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (probe < 0)
    return false;
  const bool live = ::connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 ||
                    errno == EAGAIN || errno == EINPROGRESS;
  ::close(probe);
  return live;
}

/// Removes a socket file left by a server that is gone; refuses a path a live server listens on
/// (taking it over would cut that server's clients off) and anything that is not a socket.
void clear_stale_socket(const std::string& path, const sockaddr_un& addr) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0)
    return;
  if (!S_ISSOCK(st.st_mode))
    raise(errc::backend_error,
          "cannot listen on unix:" + path + ": a file that is not a socket is there");
  if (someone_listens(addr))
    raise(errc::backend_error, "cannot listen on unix:" + path +
                                   ": another server listens there; stop it first, or name "
                                   "another socket");
  ::unlink(path.c_str());
}

}  // namespace

unix_listener::unix_listener(std::string path, mode_t mode, bool operator_socket,
                             std::uint32_t max_per_uid, peer_table& table,
                             connection_guards& guards, std::function<void(int)> hand_over,
                             std::function<void(const std::string&)> log,
                             std::atomic<std::uint64_t>& refused)
    : path_(std::move(path)),
      operator_socket_(operator_socket),
      max_per_uid_(max_per_uid),
      table_(table),
      guards_(guards),
      hand_over_(std::move(hand_over)),
      log_(std::move(log)),
      refused_(refused) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.empty() || path_.size() >= sizeof addr.sun_path)
    raise(errc::invalid_argument, "unix socket path '" + path_ + "' is empty or longer than " +
                                      std::to_string(sizeof addr.sun_path - 1) + " bytes");
  std::memcpy(addr.sun_path, path_.data(), path_.size());
  clear_stale_socket(path_, addr);
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0)
    fail(path_, "socket");
  // Created owner-only, then widened to `mode`: no moment where others may connect.
  const mode_t old = ::umask(0177);
  const int bound = ::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  ::umask(old);
  struct stat st {};
  if (bound != 0 || ::chmod(path_.c_str(), mode) != 0 || ::lstat(path_.c_str(), &st) != 0 ||
      ::listen(fd_, SOMAXCONN) != 0 || ::pipe2(wake_, O_CLOEXEC) != 0 ||
      (epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC)) < 0 || !watch(epoll_fd_, fd_, EPOLLIN) ||
      !watch(epoll_fd_, wake_[0], EPOLLIN)) {
    const int saved = errno;
    for (const int fd : {fd_, wake_[0], wake_[1], epoll_fd_})
      if (fd >= 0)
        ::close(fd);
    errno = saved;
    fail(path_, "bind");
  }
  device_ = st.st_dev;
  inode_ = st.st_ino;
  thread_ = std::thread([this] { run(); });
}

unix_listener::~unix_listener() {
  const char stop = 1;
  static_cast<void>(::write(wake_[1], &stop, 1));
  thread_.join();
  again_.clear();
  by_fd_.clear();  // closes every connection
  ::close(fd_);
  ::close(epoll_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == device_ && st.st_ino == inode_)
    ::unlink(path_.c_str());  // only our own file: a successor's stays where it is
}

void unix_listener::run() {
  std::array<epoll_event, 64> events{};
  while (true) {
    const int n = ::epoll_wait(epoll_fd_, events.data(), events.size(), again_.empty() ? -1 : 0);
    if (n < 0 && errno != EINTR)
      return;
    for (int i = 0; i < n; ++i) {
      const int fd = events[static_cast<std::size_t>(i)].data.fd;
      if (fd == wake_[0])
        return;
      if (fd == fd_)
        accept_some();
      else if (const auto it = by_fd_.find(fd); it != by_fd_.end())
        pump(handle(it->second));  // a copy: `drop` erases the entry
    }
    for (const auto& c : std::exchange(again_, {}))
      if (c->pipe)  // not dropped since
        pump(c);
  }
}

void unix_listener::accept_some() {
  // A flood of one uid's connections must not fill the backlog that every uid's new connections
  // wait in: up to 256 are taken each time, refused ones closed at once (the socket stays
  // readable for the rest, level-triggered).
  for (int i = 0; i < 256 && accept_one(); ++i) {
  }
}

std::string unix_listener::refusal(const std::string& identity, uid_t uid) {
  // The rate first: a flood is refused without a walk of the peer table.
  if (auto why = guards_.admit(identity, connection_guards::clock_type::now()); !why.empty())
    return why;
  if (table_.live_of(uid, operator_socket_) >= max_per_uid_)
    return "it has " + std::to_string(max_per_uid_) + " open, the cap per uid";
  return {};
}

bool unix_listener::accept_one() {
  const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (c < 0)
    return errno == ECONNABORTED;  // EAGAIN: none left; EMFILE: refused by the kernel's limit
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    ::close(c);
    return true;
  }
  const auto identity = operator_socket_ ? "operator" : "uid " + std::to_string(cred.uid);
  if (const auto why = refusal(identity, cred.uid); !why.empty()) {
    ++refused_;
    if (log_)
      log_("refused a connection of " + identity + " (pid " + std::to_string(cred.pid) +
           ") on unix:" + path_ + ": " + why);
    ::close(c);
    return true;
  }
  auto conn = std::make_shared<connection>();
  conn->pipe = std::make_unique<guarded_pipe>(std::make_unique<socket_transport>(c));
  conn->identity = identity;
  const int theirs = conn->pipe->open_inner(guards_.make(conn->identity));
  struct stat st {};
  if (theirs < 0 || ::fstat(theirs, &st) != 0) {
    if (theirs >= 0)
      ::close(theirs);
    return true;  // out of descriptors: `conn` closes the peer's socket
  }
  table_.add(theirs, st.st_ino, peer_identity{conn->identity, operator_socket_}, cred.uid);
  conn->theirs = theirs;
  conn->inode = st.st_ino;
  by_fd_.emplace(c, conn);
  by_fd_.emplace(conn->pipe->inner(), conn);
  hand_over_(theirs);
  if (!watch(epoll_fd_, c, both_ways) || !watch(epoll_fd_, conn->pipe->inner(), both_ways))
    drop(conn);
  else
    pump(conn);  // the peer's first bytes may be there already
  return true;
}

void unix_listener::pump(const handle& c) {
  const auto flow = guards_.pump(*c->pipe, c->identity, log_);
  if (flow == guarded_pipe::flow::more)
    again_.push_back(c);
  else if (flow == guarded_pipe::flow::ended)
    drop(c);
}

void unix_listener::drop(const handle& c) {
  if (!c->pipe)
    return;
  by_fd_.erase(c->pipe->peer().fd());
  by_fd_.erase(c->pipe->inner());
  c->pipe.reset();  // closes both sockets; epoll forgets them with the close
  table_.remove(c->theirs, c->inode);
}

std::optional<peer_identity> identify_peer(const peer_table& table, const std::string& peer) {
  if (!peer.starts_with("fd:"))
    return std::nullopt;
  int fd = -1;
  const auto [end, ec] = std::from_chars(peer.data() + 3, peer.data() + peer.size(), fd);
  if (ec != std::errc{} || end != peer.data() + peer.size())
    return std::nullopt;
  return table.find(fd);
}

}  // namespace uma::detail
