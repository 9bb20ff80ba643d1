#pragma once

// The wire's Unix-socket listeners. uma accepts the connections itself so that it can read the
// peer's credentials (SO_PEERCRED: uid, pid) before gRPC sees a byte and cap connections per
// uid; each connection then reaches gRPC through a guarded_pipe (AddInsecureChannelFromFd on its
// inner end, whose peer string is "fd:N"), whose frame guard bounds what the peer sends. The
// table maps each fd gRPC serves to its identity for the calls that arrive on it.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <uma/actors/remote/wire/detail/connection_guards.hpp>
#include <uma/actors/remote/wire/detail/guarded_pipe.hpp>

namespace uma::detail {

/// Who is on the other end of a connection.
struct peer_identity {
  std::string tenant{};  ///< "uid 1000" or "cert CN": what quotas and session caps count
  bool is_operator = false;
};

/// The identities of the connections handed to gRPC as plain sockets (Unix-socket connections,
/// and TLS connections once uma's front has ended their handshake), by gRPC's fd. An entry is valid
/// only while its fd still names the same socket (checked by inode), so a number the kernel reuses
/// for a later connection never lends the old identity.
class peer_table {
 public:
  /// Records `fd` (a connected socket of inode `inode`) as `who`'s; `uid` for a Unix-socket
  /// connection (counted by `live_of`), none for a TLS one (the front counts those).
  void add(int fd, ino_t inode, peer_identity who, std::optional<uid_t> uid);
  /// Forgets `fd` if it is still the socket of inode `inode` (its connection was closed by uma's
  /// front: its slot frees now, not when gRPC gets round to closing its end).
  void remove(int fd, ino_t inode);
  /// The identity of `fd` if it is still the socket recorded.
  [[nodiscard]] std::optional<peer_identity> find(int fd) const;
  /// Live connections of `uid` on the operator's socket (`operator_socket`) or on the tenants'
  /// (dead entries are dropped on the way): each socket has its own cap, so a uid's tenant
  /// connections never lock its operator out.
  [[nodiscard]] std::uint32_t live_of(uid_t uid, bool operator_socket);

 private:
  struct entry {
    ino_t inode = 0;
    peer_identity who;
    std::optional<uid_t> uid;
  };

  mutable std::mutex mutex_;
  std::map<int, entry> entries_;
};

/// The identity of the connection gRPC names `peer` ("fd:N": every connection gRPC serves was
/// handed to it as a socket by uma), from `table`; nullopt when the table names none.
[[nodiscard]] std::optional<peer_identity> identify_peer(const peer_table& table,
                                                         const std::string& peer);

/// One listening Unix socket and its thread, which accepts the connections and moves their
/// bytes.
class unix_listener {
 public:
  /// Binds `path` (a socket file a server that is gone left there is replaced; one a live server
  /// listens on, or any other file, is an error), sets
  /// `mode`, listens, and hands gRPC's end of every accepted connection's pipe (guarded by a
  /// guard of `guards`) to `hand_over` after recording it in `table` (the operator's if
  /// `operator_socket`). Connections past `max_per_uid` of one uid are closed at once and
  /// counted in `refused`. Throws `error(backend_error)` naming the path.
  unix_listener(std::string path, mode_t mode, bool operator_socket, std::uint32_t max_per_uid,
                peer_table& table, connection_guards& guards, std::function<void(int)> hand_over,
                std::function<void(const std::string&)> log, std::atomic<std::uint64_t>& refused);
  unix_listener(const unix_listener&) = delete;
  unix_listener& operator=(const unix_listener&) = delete;
  /// Stops accepting, closes every connection (gRPC sees each end), closes the socket and
  /// removes its file if the file is still this listener's (another server may have taken the
  /// path since someone removed it).
  ~unix_listener();

 private:
  struct connection {
    std::unique_ptr<guarded_pipe> pipe;
    std::string identity;
    int theirs = -1;  // gRPC's end, and its inode: the peer table's entry
    ino_t inode = 0;
  };
  using handle = std::shared_ptr<connection>;

  void run();
  void accept_some();
  /// Takes one connection from the backlog; false when there is none left.
  bool accept_one();
  /// Why a new connection of `identity` (uid `uid`) is refused now; empty when it is admitted.
  [[nodiscard]] std::string refusal(const std::string& identity, uid_t uid);
  /// Moves `c`'s bytes: drops it when it ended, queues it for the next round when its budget
  /// ran out with bytes still ready (edge-triggered epoll would not report them again).
  void pump(const handle& c);
  void drop(const handle& c);

  std::string path_;
  bool operator_socket_;
  std::uint32_t max_per_uid_;
  peer_table& table_;
  connection_guards& guards_;
  std::function<void(int)> hand_over_;
  std::function<void(const std::string&)> log_;
  std::atomic<std::uint64_t>& refused_;
  int fd_ = -1;
  dev_t device_ = 0;  // the socket file bound at path_: which file is ours at exit
  ino_t inode_ = 0;
  int epoll_fd_ = -1;
  int wake_[2] = {-1, -1};
  // Touched by the listener's thread only (and by the destructor once it is joined).
  std::map<int, handle> by_fd_;  // both descriptors of each connection
  std::vector<handle> again_;    // connections to pump in the next round
  std::thread thread_;
};

}  // namespace uma::detail
