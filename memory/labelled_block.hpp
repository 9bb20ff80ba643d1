#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace uma {

/// A block handed out with a label (`block_allocator::allocate_labelled`), as the allocator's
/// report and snapshot show it while it is out.
struct labelled_block {
  std::uint64_t id = 0;     ///< the block's id (the id space of regions)
  std::uint64_t bytes = 0;  ///< bytes asked for
  std::string label{};
  std::int64_t refs = 0;  ///< handles alive now (0: its last drop is on its way back)
  std::chrono::steady_clock::time_point created{};  ///< when it was handed out
};

}  // namespace uma
