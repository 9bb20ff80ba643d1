#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include "support/actor_fixture.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;

class supervisor : public test::actor_fixture {
 protected:
  allocator_supervisor_actor start(supervisor_config cfg = {}) {
    cfg.allocator.backend.instance = faults_;
    cfg.backoff_initial = 0ms;
    sup_ = spawn_supervisor(sys_, std::move(cfg));
    return sup_;
  }

  /// Waits (bounded) until the supervisor reports `pred`; the failure message says what it saw.
  template <class Pred>
  supervision_stats await(Pred pred) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    auto s = query_supervision(sys_, sup_);
    while (!pred(s) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
      s = query_supervision(sys_, sup_);
    }
    EXPECT_TRUE(pred(s)) << "state " << to_string(s.state) << ", generation "
                         << s.current_generation;
    return s;
  }

  std::shared_ptr<fault_injecting_backend> faults_ =
      std::make_shared<fault_injecting_backend>(backend_);
  allocator_supervisor_actor sup_;
};

TEST_F(supervisor, ForwardsTheAllocatorInterfaceToGeneration1) {
  client c(sys_, start());
  c.set_max_block_bytes(0);  // the message path (faults, quota, regions)
  auto ref = c.allocate<float>(64);
  EXPECT_EQ(ref.generation(), 1u);
  c.prefetch(ref, location::host());
  EXPECT_EQ(c.attributes(ref).last_prefetch_location, location::host());
  const auto s = query_supervision(sys_, sup_);
  EXPECT_EQ(s.state, supervisor_state::running);
  EXPECT_EQ(s.current_generation, 1u);
  EXPECT_EQ(s.restarts, 0u);
  c.stop();
}

TEST_F(supervisor, ContextLostRestartsAndOldRefsGoInert) {
  client c(sys_, start());
  c.set_max_block_bytes(0);  // the message path (faults, quota, regions)
  auto old_ref = c.allocate<float>(64);
  faults_->inject({backend_op::prefetch, 1, errc::context_lost});
  UMA_EXPECT_ERRC(c.prefetch(old_ref, location::host()), errc::context_lost);
  const auto s = await([](const supervision_stats& s) {
    return s.current_generation == 2 && s.state == supervisor_state::running;
  });
  EXPECT_EQ(s.restarts, 1u);
  EXPECT_NE(s.last_exit_reason.find("context_lost"), std::string::npos) << s.last_exit_reason;
  // The old generation's post_stop freed its region: its refs are inert and refused.
  EXPECT_FALSE(old_ref.valid());
  UMA_EXPECT_ERRC((void)old_ref.pin(), errc::allocator_stopped);
  UMA_EXPECT_ERRC(c.prefetch(old_ref, location::host()), errc::allocator_stopped);
  auto fresh = c.allocate<float>(64);
  EXPECT_EQ(fresh.generation(), 2u);
  EXPECT_TRUE(fresh.valid());
  ASSERT_EQ(s.generations.size(), 2u);
  EXPECT_FALSE(s.generations[0].alive);
  EXPECT_EQ(s.generations[0].final_stats.live_bytes, 0u);  // dead generations hold nothing
  EXPECT_EQ(s.generations[0].regions_freed, 1u);
  old_ref.reset();  // dropping an inert ref frees nothing
  fresh.reset();
  c.stop();
  EXPECT_EQ(backend_->counters().frees, backend_->counters().allocations);
  EXPECT_EQ(backend_->counters().bad_frees, 0u);
}

TEST_F(supervisor, OutOfMemoryIsResumedWithoutARestart) {
  client c(sys_, start());
  c.set_max_block_bytes(0);  // the message path (faults, quota, regions)
  // Twice: the actor's try, then its one more try on the general lane behind the queued frees.
  faults_->inject({backend_op::allocate, 1, errc::out_of_memory});
  faults_->inject({backend_op::allocate, 2, errc::out_of_memory});
  UMA_EXPECT_ERRC((void)c.allocate<float>(64), errc::out_of_memory);
  auto ref = c.allocate<float>(64);  // same incarnation keeps serving
  EXPECT_EQ(ref.generation(), 1u);
  const auto s = query_supervision(sys_, sup_);
  EXPECT_EQ(s.restarts, 0u);
  EXPECT_EQ(s.current_generation, 1u);
  EXPECT_EQ(c.stats().failures_of(errc::out_of_memory), 1u);
  c.stop();
}

TEST_F(supervisor, UnrecoverableStopsTheAllocatorForGood) {
  client c(sys_, start());
  c.set_max_block_bytes(0);  // the message path (faults, quota, regions)
  auto ref = c.allocate<float>(64);
  faults_->inject({backend_op::advise, 1, errc::unrecoverable});
  UMA_EXPECT_ERRC(c.advise(ref, advice::set_read_mostly), errc::unrecoverable);
  await([](const supervision_stats& s) { return s.state == supervisor_state::stopped; });
  UMA_EXPECT_ERRC((void)c.allocate<float>(8), errc::allocator_stopped);
  EXPECT_EQ(query_supervision(sys_, sup_).restarts, 0u);
  c.stop();
}

TEST_F(supervisor, AnyOtherFatalFailureEscalates) {
  caf::scoped_actor self{sys_};
  auto sup = start();
  self->monitor(sup);
  client c(sys_, sup);
  c.set_max_block_bytes(0);  // the message path (faults, quota, regions)
  faults_->inject({backend_op::allocate, 1, errc::backend_error, false, true});
  UMA_EXPECT_ERRC((void)c.allocate<float>(8), errc::backend_error);
  caf::error reason;
  self->receive([&](caf::down_msg& dm) { reason = dm.reason; });
  EXPECT_EQ(reason.code(), static_cast<std::uint8_t>(errc::unrecoverable));
  EXPECT_EQ(backend_->counters().live_allocations, 0u);
}

TEST_F(supervisor, StoppingTheSupervisorWaitsForTheIncarnationsPostStop) {
  client c(sys_, start());
  c.set_max_block_bytes(0);  // the message path (faults, quota, regions)
  auto ref = c.allocate<float>(64);
  c.stop();
  EXPECT_FALSE(ref.valid());
  EXPECT_EQ(backend_->counters().frees, 1u);
}

TEST_F(supervisor, EightClientsSurvive200CrashesWithEveryRequestAnswered) {
  supervisor_config cfg;
  cfg.max_restarts = 100000;
  auto sup = start(cfg);
  // Every 20th allocation kills the incarnation it reaches.
  faults_->inject({backend_op::allocate, 20, errc::context_lost, true, true});
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> ok{0}, refused{0}, unexpected{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t)
    clients.emplace_back([&] {
      client c(sys_, sup);
      c.set_max_block_bytes(0);  // the message path: faults hit backend allocations, quota and
                                 // region counts per request
      c.set_timeout(30s);
      while (!done) {
        try {
          auto ref = c.allocate<float>(256);
          c.prefetch(ref, location::host());
          c.advise(ref, advice::set_read_mostly);
          ref.reset();
          ++ok;
        } catch (const error& e) {
          if (e.code() == errc::allocator_stopped || e.code() == errc::context_lost)
            ++refused;
          else
            ++unexpected;
        }
      }
    });
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  auto s = query_supervision(sys_, sup);
  while (s.restarts < 200 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
    s = query_supervision(sys_, sup);
  }
  done = true;
  for (auto& t : clients)
    t.join();
  std::printf("[ measure  ] %llu restarts, %llu cycles ok, %llu refused with a uma error\n",
              static_cast<unsigned long long>(s.restarts),
              static_cast<unsigned long long>(ok.load()),
              static_cast<unsigned long long>(refused.load()));
  EXPECT_GE(s.restarts, 200u);
  EXPECT_EQ(unexpected.load(), 0u);
  EXPECT_GT(ok.load(), 0u);
  client(sys_, sup).stop();
  const auto counters = backend_->counters();
  EXPECT_EQ(counters.live_bytes, 0u);
  EXPECT_EQ(counters.frees, counters.allocations);
  EXPECT_EQ(counters.bad_frees, 0u);
}

}  // namespace
}  // namespace uma
