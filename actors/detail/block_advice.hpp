#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>

#include <uma/memory/advice_state.hpp>
#include <uma/memory/control_block.hpp>
#include <uma/sys/worker_lanes.hpp>

namespace uma::detail {

/// The advice the allocator applied to blocks of its block allocator, and the way such a block
/// comes back: a block is tracked from its first advice on, which makes its last drop come
/// through the actor's release queue (`needs_reset`); the actor then resets the advice on the
/// general lane (where the next owner's advice runs too) and gives the block back, so its next
/// user gets none. Blocks never advised never reach the actor. Part of the incarnation's state
/// through allocation_core, which owns it (reachable only through the incarnation's guard); not
/// thread-safe on its own.
class block_advice {
 public:
  block_advice(std::shared_ptr<backend> backend, worker_lanes& lanes)
      : backend_(std::move(backend)), lanes_(lanes) {}

  /// The advice state of block `rec`, tracked from now on (its last drop comes to the actor).
  [[nodiscard]] advice_state& track(region* rec);
  /// The state of the tracked block `id`, or null.
  [[nodiscard]] advice_state* find(std::uint64_t id);
  [[nodiscard]] const advice_state* find(std::uint64_t id) const;
  /// The last drop of block `id` came back: its advice is reset on the general lane (none to
  /// reset: at once) and it goes back to the block allocator. False for an id not tracked.
  bool release(std::uint64_t id);
  /// post_stop: the tracked blocks among `ids` (queued, not handled) go back without a reset
  /// (their memory goes with their slab), and nothing is tracked any more.
  void give_back(std::span<const std::uint64_t> ids) noexcept;

 private:
  /// A block whose advice the allocator changed (reset when it comes back).
  struct advised_block {
    region* block;
    advice_state state;
  };

  std::shared_ptr<backend> backend_;
  worker_lanes& lanes_;
  std::unordered_map<std::uint64_t, advised_block> blocks_;
};

}  // namespace uma::detail
