#pragma once

#include <caf/actor_system.hpp>

#include <uma/actors/allocator_config.hpp>
#include <uma/messages/interface.hpp>

namespace uma {

/// Spawns an allocator incarnation that owns every managed region it hands out. The backend is
/// created first, so a bad choice (`cuda` without a usable device) throws `error(no_device)`
/// here rather than failing later requests. The actor stops on an exit message (or when no
/// handle to it is left); its post_stop then frees every region and turns all refs inert.
[[nodiscard]] managed_allocator_actor spawn_allocator(caf::actor_system& sys,
                                                      allocator_config config = {});

}  // namespace uma
