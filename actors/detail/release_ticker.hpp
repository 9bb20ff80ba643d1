#pragma once

#include <chrono>
#include <utility>

#include <uma/actors/detail/allocation_core.hpp>
#include <uma/memory/control_block.hpp>

namespace uma::detail {

/// How often the allocator drains releases while they keep coming (docs/design.md, "Lifetime
/// model"): instead of being woken by each batch, a wake-up being a message sent from the
/// releasing thread, which from outside a CAF worker costs that thread a scheduler wake-up, the
/// bulk of an actor client's allocate+release round trip.
inline constexpr auto release_tick = std::chrono::milliseconds(1);

/// The allocator's side of the release tick; the actor schedules the ticks it asks for.
class release_ticker {
 public:
  release_ticker(control_block& control, allocation_core& core) : control_(control), core_(core) {}

  /// Adds the slabs the block allocator made since and frees what the refs' last drops queued,
  /// if anything; true when a tick must be scheduled (the ticking starts now, so further
  /// releases stop waking the actor). A new slab is on the release queue too
  /// (`control_block::enqueue_slab`), so `has_releases` holds until the slab is adopted: a plan
  /// by address range or a report finds a block of a slab made a moment ago, also while no
  /// release is queued.
  [[nodiscard]] bool drain() {
    if (!control_.has_releases())
      return false;
    core_.drain_releases();
    drained_since_tick_ = true;
    return control_.arm_tick();
  }

  /// On a tick: drains; true when the next tick must be scheduled. A tick with no release
  /// since the last one ends the ticking (the next release wakes the actor again), unless a
  /// release raced the disarming: then it is drained and the ticking goes on.
  [[nodiscard]] bool tick() {
    (void)drain();
    if (!std::exchange(drained_since_tick_, false) && control_.disarm_tick())
      return false;
    (void)drain();
    return true;
  }

 private:
  control_block& control_;
  allocation_core& core_;
  bool drained_since_tick_ = false;
};

}  // namespace uma::detail
