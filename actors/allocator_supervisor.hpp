#pragma once

#include <caf/actor_system.hpp>

#include <uma/actors/supervision.hpp>
#include <uma/messages/interface.hpp>

namespace uma {

/// Spawns an `AllocatorSupervisor`: it spawns the first allocator incarnation (generation 1),
/// forwards every message of the allocator interface to the current incarnation, monitors it and
/// applies the decision table when it exits abnormally. Requests in flight when an incarnation
/// dies reply `allocator_stopped` naming the generation and reason; requests that arrive while a
/// restart is pending wait for the new incarnation. Past the restart intensity the supervisor
/// exits with an `unrecoverable` error naming the limit and the last failure.
///
/// Stopping the supervisor (an exit message) stops the incarnation first and waits for its
/// post_stop, so `client::stop()` on the supervisor's handle returns with all memory freed.
///
/// `restart_atom` replaces the incarnation on purpose: it stops (post_stop runs, its refs go
/// inert), the next generation starts at once, and the reply is its number. Such restarts count
/// in `supervision_stats::requested_restarts`, never against the restart intensity. Observers
/// subscribed with `subscribe_atom` receive a `restart_event` for every new incarnation and one
/// when the supervisor stops; the supervisor monitors them and forgets those that go down.
[[nodiscard]] allocator_supervisor_actor spawn_supervisor(caf::actor_system& sys,
                                                          supervisor_config config = {});

/// Asks a supervisor for its counters, blocking (tools, tests). Throws `uma::error` when the
/// supervisor is gone.
[[nodiscard]] supervision_stats query_supervision(caf::actor_system& sys,
                                                  const allocator_supervisor_actor& supervisor);

}  // namespace uma
