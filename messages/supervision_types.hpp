#pragma once

// What a supervisor (actors/allocator_supervisor.hpp) tells about itself: its state, its
// counters across incarnations, and the events it sends to restart observers. These are
// message types, so they live in messages/.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/error.hpp>

#include <uma/memory/allocator_stats.hpp>

namespace uma {

/// Where a supervisor stands.
enum class supervisor_state : std::uint8_t {
  running,     ///< an incarnation serves requests
  restarting,  ///< between incarnations: requests wait for the next one
  stopped,     ///< no incarnation any more: requests get allocator_stopped
};

/// "running", "restarting", "stopped".
[[nodiscard]] std::string_view to_string(supervisor_state s) noexcept;

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
  std::uint64_t restarts = 0;  ///< incarnations replaced after a failure (resumes included)
  std::uint64_t resumes = 0;   ///< failures the allocator absorbed by itself (replied, kept going)
  std::uint64_t requested_restarts = 0;  ///< incarnations replaced by a `restart` request
  supervisor_state state = supervisor_state::running;
  std::string last_exit_reason{};
  std::vector<std::uint64_t> backoffs_ms{};  ///< every restart delay applied, in order
  std::vector<generation_record> generations{};
  std::uint64_t observers = 0;  ///< restart observers subscribed now
  friend bool operator==(const supervision_stats&, const supervision_stats&) = default;
};

/// Why a restart observer hears from its supervisor.
enum class restart_cause : std::uint8_t {
  failure,    ///< the incarnation went down and the decision table replaced it
  requested,  ///< a `restart` request replaced it on purpose
  stopped,    ///< no new incarnation will follow: the supervisor stopped (or is exiting)
};

/// "failure", "requested", "stopped".
[[nodiscard]] std::string_view to_string(restart_cause c) noexcept;

/// Sent (`restarted_atom, restart_event`) to each subscribed observer when a new incarnation has
/// started, and once when the supervisor stops.
struct restart_event {
  std::uint64_t generation_before = 0;  ///< the incarnation that ended
  std::uint64_t generation_after = 0;   ///< the one now serving; 0 when `cause` is stopped
  restart_cause cause = restart_cause::failure;
  caf::error reason{};  ///< the ended incarnation's exit reason; none for a requested restart
};

/// CAF inspection: an event is plain data (observers may live in another process).
template <class Inspector>
auto inspect(Inspector& f, restart_event& x) {
  return f(x.generation_before, x.generation_after, x.cause, x.reason);
}

}  // namespace uma
