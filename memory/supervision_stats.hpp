#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <uma/memory/allocator_stats.hpp>

namespace uma {

/// What one allocator incarnation did, kept by its supervisor after it is gone.
struct generation_record {
  std::uint64_t generation = 0;
  bool alive = false;
  allocator_stats final_stats{};  ///< as of its post_stop (live bytes: what it had to leak)
  std::uint64_t regions_freed = 0;
  std::uint64_t regions_leaked = 0;
  std::string exit_reason{};  ///< rendered exit reason, empty while alive
  friend bool operator==(const generation_record&, const generation_record&) = default;
};

/// The supervisor's view across incarnations.
struct supervision_stats {
  std::uint64_t current_generation = 0;
  std::uint64_t restarts = 0;
  std::uint64_t resumes = 0;  ///< failures the allocator absorbed by itself (replied, kept going)
  std::string state{};        ///< "running", "restarting", "stopped"
  std::string last_exit_reason{};
  std::vector<std::uint64_t> backoffs_ms{};  ///< every restart delay applied, in order
  std::vector<generation_record> generations{};
  friend bool operator==(const supervision_stats&, const supervision_stats&) = default;
};

}  // namespace uma
