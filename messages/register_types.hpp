#pragma once

#include <caf/actor_system_config.hpp>

namespace uma {

/// Registers uma with an actor system configuration: the `uma` error category and its renderer,
/// and the message types of the remote-safe interface (messages/remote_interface.hpp), so that
/// they serialize. Call once on the config before constructing the `caf::actor_system`. (Other
/// processes talk to a serving node over its gRPC wire, not CAF's: docs/distributed.md.)
void register_types(caf::actor_system_config& cfg);

}  // namespace uma
