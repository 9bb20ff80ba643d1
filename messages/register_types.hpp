#pragma once

#include <caf/actor_system_config.hpp>

namespace uma {

/// Registers uma with an actor system configuration: the `uma` error category and its renderer.
/// Call once on the config before constructing the `caf::actor_system`.
void register_types(caf::actor_system_config& cfg);

}  // namespace uma
