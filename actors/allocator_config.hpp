#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "sys/backend.hpp"

namespace uma {

/// How an allocator incarnation is set up.
struct allocator_config {
  /// Which backend to create (ignored when `backend` is given).
  backend_choice choice = backend_choice::automatic;
  /// A backend to use instead of creating one (tests: a fault-injecting decorator).
  std::shared_ptr<uma::backend> backend{};
  /// Most bytes the allocator may hold at once; 0 takes the backend's default (on CUDA 3/4 of
  /// the smallest free device memory at start, on the host half of physical memory).
  std::uint64_t quota_bytes = 0;
  /// How long post_stop waits for pins to be released before leaking what is still pinned.
  std::chrono::milliseconds drain_timeout{5000};
  /// Incarnation number; refs of other generations are inert for this allocator.
  std::uint64_t generation = 1;
  /// Run the actor on its own thread rather than on CAF's scheduler.
  bool detached = false;
};

}  // namespace uma
