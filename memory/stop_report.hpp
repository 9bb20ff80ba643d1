#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace uma {

/// Life cycle of one allocator incarnation, as every ref of it sees it.
enum class allocator_state : int { alive = 0, stopping = 1, stopped = 2 };

/// What an allocator's post_stop did: published on the control block for anyone holding a ref
/// or the client facade, since the actor that did it is gone.
struct stop_report {
  std::uint64_t regions_freed = 0;
  std::uint64_t bytes_freed = 0;
  std::uint64_t regions_leaked = 0;  ///< pinned past the drain timeout: leaked on purpose
  std::uint64_t bytes_leaked = 0;
  std::vector<std::uint64_t> leaked_ids;
  bool pins_drained = true;  ///< false when the drain timeout expired with pins held
  std::chrono::microseconds duration{0};
};

}  // namespace uma
