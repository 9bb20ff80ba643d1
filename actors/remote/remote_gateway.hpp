#pragma once

#include <string_view>

#include <caf/actor_system.hpp>

#include <uma/actors/remote/gateway_config.hpp>
#include <uma/messages/interface.hpp>
#include <uma/messages/remote_interface.hpp>

namespace uma {

/// Spawns the remote gateway of a serving node: it implements `remote_allocator_actor` on top
/// of `supervisor` for the node's wire server (actors/remote/wire/wire_server.hpp), which is its
/// only client: it is never published (a local allocator supervisor) and holds the leases of remote
/// sessions. Each lease is a `byte_ref` the gateway keeps; dropping it (an explicit release, a
/// closed session, a session whose actor went down, an idle session) lets the allocator free the
/// region. The gateway monitors the supervisor and quits with its exit reason when it goes down; a
/// local exit message stops it and releases every lease. Exit and link messages from remote actors
/// are dropped before they reach it (a peer can neither kill it nor tie its life to its own).
[[nodiscard]] remote_allocator_actor spawn_remote_gateway(caf::actor_system& sys,
                                                          allocator_supervisor_actor supervisor,
                                                          gateway_config config = {});

/// A fresh operator key: 128 bits from the kernel's random source, never all zero.
[[nodiscard]] operator_key make_operator_key();

/// True for "localhost", IPv4 127.0.0.0/8 and IPv6 ::1 (also written [::1]).
[[nodiscard]] bool is_loopback_address(std::string_view address) noexcept;

}  // namespace uma
