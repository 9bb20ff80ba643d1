// The blocking facade's ownership (actors/client.hpp): which allocator or supervisor it spawned,
// `supervisor()`, and the final report that `stop()` returns from the post_stop that ran.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include "support/actor_fixture.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;

class client_facade : public test::actor_fixture {
 protected:
  supervisor_config supervised() {
    supervisor_config c;
    c.allocator.backend.instance = backend_;
    c.backoff_initial = 0ms;
    return c;
  }
};

TEST_F(client_facade, StopReturnsWhatTheAllocatorsPostStopDid) {
  client c(sys_, host_config());
  c.set_max_block_bytes(0);  // counts one region per allocation: the message path
  EXPECT_FALSE(c.supervisor());
  auto a = c.allocate<float>(1024);
  auto b = c.allocate<std::byte>(100);
  const auto report = c.stop();
  ASSERT_TRUE(report);
  // The same post_stop the refs saw: two regions still held, freed there.
  ASSERT_TRUE(a.stop_info());
  EXPECT_EQ(report->stop.regions_freed, 2u);
  EXPECT_EQ(report->stop.regions_freed, a.stop_info()->regions_freed);
  EXPECT_EQ(report->stop.bytes_freed, a.stop_info()->bytes_freed);
  EXPECT_GE(report->stop.bytes_freed, 1024 * sizeof(float) + 100);
  EXPECT_EQ(report->stop.regions_leaked, 0u);
  EXPECT_TRUE(report->stop.leaked_ids.empty());
  EXPECT_TRUE(report->stop.pins_drained);
  EXPECT_EQ(report->stats.generation, 1u);
  EXPECT_EQ(report->stats.allocations, 2u);
  EXPECT_EQ(report->stats.backend, "host");
  // Stopping again changes nothing and returns the same report.
  const auto again = c.stop();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->stop.regions_freed, 2u);
  EXPECT_EQ(again->stats, report->stats);
}

TEST_F(client_facade, StopReportsALeakForcedByAPin) {
  auto config = host_config();
  config.supervision.drain_timeout = 10ms;
  client c(sys_, config);
  c.set_max_block_bytes(0);  // the leaked id is the region's: the message path
  auto ref = c.allocate<int>(16);
  auto pin = ref.pin();
  const auto report = c.stop();
  ASSERT_TRUE(report);
  EXPECT_FALSE(report->stop.pins_drained);
  EXPECT_EQ(report->stop.regions_leaked, 1u);
  ASSERT_EQ(report->stop.leaked_ids.size(), 1u);
  EXPECT_EQ(report->stop.leaked_ids[0], ref.id());
}

TEST_F(client_facade, AClientGivenAHandleReportsNothingItCouldNotSee) {
  auto alloc = spawn_allocator(sys_, host_config());
  client c(sys_, alloc);
  EXPECT_FALSE(c.supervisor());
  EXPECT_FALSE(c.stop());
}

TEST_F(client_facade, ASupervisedClientHandsOutItsSupervisor) {
  std::atomic<int> user_on_stop{0};
  auto config = supervised();
  config.allocator.supervision.on_stop = [&](const allocator_stats&, const stop_report&) {
    ++user_on_stop;
  };
  client c(sys_, config);
  ASSERT_TRUE(c.supervisor());
  const auto sup = *c.supervisor();
  EXPECT_EQ(query_supervision(sys_, sup).current_generation, 1u);
  caf::scoped_actor self{sys_};
  std::uint64_t gen = 0;
  self->request(sup, 20s, restart_atom_v)
      .receive([&](std::uint64_t g) { gen = g; },
               [&](caf::error& e) { ADD_FAILURE() << sys_.render(e); });
  EXPECT_EQ(gen, 2u);
  auto ref = c.allocate<float>(64);
  EXPECT_EQ(ref.generation(), 2u);
  const auto report = c.stop();
  // The final report is generation 2's, whose post_stop ran last; the user's on_stop ran for
  // both generations.
  ASSERT_TRUE(report);
  EXPECT_EQ(report->stats.generation, 2u);
  EXPECT_EQ(report->stop.regions_freed, 1u);
  EXPECT_EQ(user_on_stop.load(), 2);
  EXPECT_FALSE(c.supervisor());  // stopped
  EXPECT_FALSE(ref.valid());
  EXPECT_EQ(backend_->counters().frees, backend_->counters().allocations);
}

TEST_F(client_facade, AClientGivenASupervisorHandsItOutButDoesNotOwnIt) {
  auto sup = spawn_supervisor(sys_, supervised());
  {
    client c(sys_, sup);
    ASSERT_TRUE(c.supervisor());
    EXPECT_TRUE(*c.supervisor() == sup);
  }
  // The client's destructor left it running.
  EXPECT_EQ(query_supervision(sys_, sup).state, supervisor_state::running);
  EXPECT_FALSE(client(sys_, sup).stop());
}

}  // namespace
}  // namespace uma
