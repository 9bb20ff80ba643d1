#include <uma/actors/scheduler_tuning.hpp>

#include <chrono>

#include <caf/timestamp.hpp>

namespace uma {

void tune_scheduler(caf::actor_system_config& cfg) {
  cfg.set("work-stealing.moderate-sleep-duration", caf::timespan{std::chrono::microseconds(0)});
}

}  // namespace uma
