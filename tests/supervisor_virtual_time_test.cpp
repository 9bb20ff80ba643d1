// Restart intensity and backoff in virtual time: CAF's test_coordinator runs every actor on the
// test thread and its clock only moves when the test advances it. Failures are injected on the
// allocate path, which runs on the actor's own thread, so nothing here depends on real threads.
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/messages/error_category.hpp>
#include <uma/messages/register_types.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include <uma/sys/host_backend.hpp>

namespace uma {
namespace {

using namespace std::chrono_literals;

struct virtual_time_config : caf::actor_system_config {
  virtual_time_config() {
    register_types(*this);
    set("scheduler.policy", caf::atom("testing"));
  }
};

class supervisor_virtual_time : public ::testing::Test {
 protected:
  supervisor_virtual_time() {
    faults_->inject({backend_op::allocate, 1, errc::context_lost, true, true});
  }
  ~supervisor_virtual_time() override {
    // Nothing runs unless the test runs it: stop what is alive, then drain, so that the actor
    // system's destructor finds no running actor.
    if (sup_)
      caf::anon_send_exit(sup_, caf::exit_reason::user_shutdown);
    if (watcher_)
      caf::anon_send_exit(watcher_, caf::exit_reason::user_shutdown);
    sup_ = nullptr;
    watcher_ = nullptr;
    while (sched_.run() > 0 || sched_.trigger_timeouts() > 0) {
    }
  }

  allocator_supervisor_actor start(supervisor_config cfg) {
    cfg.allocator.backend.instance = faults_;
    auto sup = spawn_supervisor(sys_, std::move(cfg));
    sup_ = sup;
    sched_.run();
    // Watch the supervisor's exit from a test actor.
    // (Function actors get a spawn argument: with none, CAF 0.17 binds a null reference.)
    watcher_ = sys_.spawn(
        [this, sup](caf::event_based_actor* self, int) -> caf::behavior {
          self->monitor(sup);
          self->set_down_handler([this](caf::down_msg& dm) { supervisor_exit_ = dm.reason; });
          return {[](int) {}};
        },
        0);
    sched_.run();
    return sup;
  }

  /// Makes the current incarnation fail: its allocate hits the injected fatal fault.
  void crash(const allocator_supervisor_actor& sup) {
    caf::anon_send(sup, allocate_atom_v, allocate_request{16, 1});
    sched_.run();
  }

  supervision_stats stats(const allocator_supervisor_actor& sup) {
    supervision_stats out;
    sys_.spawn(
        [&](caf::event_based_actor* self, int) {
          self->request(sup, caf::infinite, supervision_atom_v).then([&](supervision_stats& s) {
            out = std::move(s);
          });
        },
        0);
    sched_.run();
    return out;
  }

  virtual_time_config cfg_;
  caf::actor_system sys_{cfg_};
  caf::scheduler::test_coordinator& sched_ =
      dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler());
  std::shared_ptr<fault_injecting_backend> faults_ =
      std::make_shared<fault_injecting_backend>(std::make_shared<host_backend>());
  caf::actor watcher_;
  allocator_supervisor_actor sup_;
  caf::error supervisor_exit_;
};

TEST_F(supervisor_virtual_time, BackoffDoublesPerRestartAndIsCapped) {
  supervisor_config cfg;
  cfg.max_restarts = 10;
  cfg.within = 60s;
  cfg.backoff_initial = 100ms;
  cfg.backoff_max = 300ms;
  auto sup = start(cfg);
  const std::chrono::milliseconds expected[] = {100ms, 200ms, 300ms, 300ms};
  for (std::size_t i = 0; i < std::size(expected); ++i) {
    crash(sup);
    auto s = stats(sup);
    ASSERT_EQ(s.state, supervisor_state::restarting) << "restart " << i;
    EXPECT_EQ(s.current_generation, i + 1);
    sched_.advance_time(expected[i] - 1ms);
    sched_.run();
    EXPECT_EQ(stats(sup).state, supervisor_state::restarting)
        << "restarted before its backoff of " << expected[i].count() << " ms";
    sched_.advance_time(1ms);
    sched_.run();
    s = stats(sup);
    EXPECT_EQ(s.state, supervisor_state::running);
    EXPECT_EQ(s.current_generation, i + 2);
  }
  const auto s = stats(sup);
  EXPECT_EQ(s.backoffs_ms, (std::vector<std::uint64_t>{100, 200, 300, 300}));
  EXPECT_EQ(s.restarts, 4u);
}

TEST_F(supervisor_virtual_time, ExceedingTheRestartIntensityEscalatesNamingTheLimit) {
  supervisor_config cfg;
  cfg.max_restarts = 2;
  cfg.within = 10s;
  cfg.backoff_initial = 0ms;
  auto sup = start(cfg);
  crash(sup);
  crash(sup);
  EXPECT_FALSE(supervisor_exit_);
  crash(sup);  // the third failure within 10 s
  ASSERT_TRUE(supervisor_exit_);
  EXPECT_EQ(supervisor_exit_.category(), error_category);
  EXPECT_EQ(supervisor_exit_.code(), static_cast<std::uint8_t>(errc::unrecoverable));
  const auto text = sys_.render(supervisor_exit_);
  EXPECT_NE(text.find("restart intensity exceeded: 2 restarts within 10000 ms"), std::string::npos)
      << text;
  EXPECT_NE(text.find("context_lost"), std::string::npos) << text;
}

TEST_F(supervisor_virtual_time, RestartsOutsideTheWindowDoNotCount) {
  supervisor_config cfg;
  cfg.max_restarts = 1;
  cfg.within = 1s;
  cfg.backoff_initial = 0ms;
  auto sup = start(cfg);
  crash(sup);
  sched_.advance_time(2s);  // the first restart leaves the window
  sched_.run();
  crash(sup);
  EXPECT_FALSE(supervisor_exit_);
  EXPECT_EQ(stats(sup).current_generation, 3u);
}

TEST_F(supervisor_virtual_time, ARestartRequestCutsABackoffShortAndItsTimerThenDoesNothing) {
  supervisor_config cfg;
  cfg.backoff_initial = 100ms;
  cfg.backoff_max = 1s;
  auto sup = start(cfg);
  crash(sup);  // generation 1 fails: its restart waits 100 ms
  ASSERT_EQ(stats(sup).state, supervisor_state::restarting);
  std::uint64_t gen = 0;
  sys_.spawn(
      [&](caf::event_based_actor* self, int) {
        self->request(sup, caf::infinite, restart_atom_v).then([&](std::uint64_t g) { gen = g; });
      },
      0);
  sched_.run();
  EXPECT_EQ(gen, 2u);  // started at once, without waiting for the backoff
  auto s = stats(sup);
  EXPECT_EQ(s.state, supervisor_state::running);
  EXPECT_EQ(s.restarts, 1u);  // the failure's restart, started early: not a requested one
  EXPECT_EQ(s.requested_restarts, 0u);
  crash(sup);                  // generation 2 fails: the second restart in the window waits 200 ms
  sched_.advance_time(100ms);  // generation 1's timer fires now, and must not restart early
  sched_.run();
  s = stats(sup);
  EXPECT_EQ(s.state, supervisor_state::restarting);
  EXPECT_EQ(s.current_generation, 2u);
  sched_.advance_time(100ms);
  sched_.run();
  s = stats(sup);
  EXPECT_EQ(s.state, supervisor_state::running);
  EXPECT_EQ(s.current_generation, 3u);
  EXPECT_EQ(s.backoffs_ms, (std::vector<std::uint64_t>{100, 200}));
}

}  // namespace
}  // namespace uma
