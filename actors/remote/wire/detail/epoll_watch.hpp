#pragma once

// Registration on the epoll of one of the wire's fronts (tls_front, unix_listener).

#include <sys/epoll.h>

#include <cstdint>

namespace uma::detail {

/// Watches `fd` on `epoll_fd` for `events` (the event's data is the fd); false on failure.
[[nodiscard]] inline bool watch(int epoll_fd, int fd, std::uint32_t events) {
  epoll_event e{};
  e.events = events;
  e.data.fd = fd;
  return ::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &e) == 0;
}

/// A connection's sockets, edge-triggered: every ready transition is one event; a pump runs
/// until nothing moves, or until its budget is spent, and then the connection is pumped again in
/// the next round.
inline constexpr std::uint32_t both_ways = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;

}  // namespace uma::detail
