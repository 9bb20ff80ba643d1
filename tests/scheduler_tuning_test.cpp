// uma::tune_scheduler (actors/scheduler_tuning.hpp): the moderate phase of CAF's work-stealing
// workers polls without sleeping, a user's own setting (command line, caf-application.ini)
// still wins, and an actor system starts and serves the allocator on the tuned scheduler.

#include <gtest/gtest.h>

#include <chrono>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/settings.hpp>

#include <uma/actors/client.hpp>
#include <uma/actors/scheduler_tuning.hpp>
#include <uma/messages/register_types.hpp>

namespace uma {
namespace {

using namespace std::chrono_literals;

/// An array, not a pointer: under clang, caf::string_view is made only from arrays.
constexpr char key[] = "work-stealing.moderate-sleep-duration";

caf::timespan moderate_sleep(const caf::actor_system_config& cfg) {
  return caf::get_or(cfg, key, caf::timespan{-1});
}

TEST(SchedulerTuning, IdleWorkersPollTheirModeratePhaseWithoutSleeping) {
  caf::actor_system_config cfg;
  const auto caf_default = moderate_sleep(cfg);
  tune_scheduler(cfg);
  EXPECT_EQ(moderate_sleep(cfg), caf::timespan{0});
  EXPECT_NE(caf_default, caf::timespan{0});  // CAF's own default sleeps (50 µs in 0.17)
}

TEST(SchedulerTuning, AUsersOwnSettingOverridesIt) {
  caf::actor_system_config cfg;
  tune_scheduler(cfg);
  ASSERT_FALSE(cfg.parse(
      caf::actor_system_config::string_list{"--caf#work-stealing.moderate-sleep-duration=20us"}));
  EXPECT_EQ(moderate_sleep(cfg), caf::timespan{20us});
}

TEST(SchedulerTuning, TheAllocatorServesOnATunedSystem) {
  caf::actor_system_config cfg;
  register_types(cfg);
  tune_scheduler(cfg);
  caf::actor_system sys{cfg};
  client c(sys);
  auto ref = c.allocate<std::byte>(4096, {.attach = attach_flag::host});  // a message
  EXPECT_EQ(c.stats().live_regions, 1u);
  ref = {};
  EXPECT_EQ(c.flush().live_regions, 0u);  // a flush counts every release made before it
}

}  // namespace
}  // namespace uma
