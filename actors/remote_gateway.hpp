#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <caf/actor_system.hpp>

#include <uma/messages/interface.hpp>
#include <uma/messages/remote_interface.hpp>

namespace uma {

/// How a remote gateway runs.
struct gateway_config {
  /// Called on the gateway's thread for each session event ("session 2 opened by node ...",
  /// "session 2 ended: its peer went down (...); released 3 lease(s), 786432 bytes"). Empty:
  /// silent.
  std::function<void(const std::string&)> log{};
};

/// Spawns the remote gateway of a serving node: it implements `remote_allocator_actor` on top
/// of `supervisor` (a local allocator supervisor) and holds the leases of remote sessions. Each
/// lease is a `byte_ref` the gateway keeps; dropping it (an explicit release, a closed session,
/// a session whose actor went down) lets the allocator free the region. The gateway monitors
/// the supervisor and quits with its exit reason when it goes down; stopping the gateway (an
/// exit message) releases every lease.
[[nodiscard]] remote_allocator_actor spawn_remote_gateway(caf::actor_system& sys,
                                                          allocator_supervisor_actor supervisor,
                                                          gateway_config config = {});

/// Publishes `gateway` on `bind`:`port` through CAF's middleman, which must be loaded
/// (`cfg.load<caf::io::middleman>()`). Port 0 takes a free port. Returns the port bound. The
/// middleman authenticates nobody: whoever reaches the port can use the interface, which is
/// why callers bind loopback unless told otherwise (docs/distributed.md). Throws
/// `error(invalid_argument)` for an empty address (CAF would bind every interface) and
/// `error(backend_error)` naming the address, the port and CAF's reason when publishing fails.
[[nodiscard]] std::uint16_t publish_gateway(caf::actor_system& sys,
                                            const remote_allocator_actor& gateway,
                                            std::uint16_t port, const std::string& bind);

/// True for "localhost", IPv4 127.0.0.0/8 and IPv6 ::1 (also written [::1]).
[[nodiscard]] bool is_loopback_address(std::string_view address) noexcept;

}  // namespace uma
