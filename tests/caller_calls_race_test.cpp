// Caller calls (actors/detail/incarnation.hpp) racing the actor: threads prefetch, advise, read
// attributes and stats on their own thread while others allocate and release through messages,
// the supervisor restarts the allocator, or the client stops it. Every call answers a value or
// allocator_stopped (a ref of an ended incarnation, or a stopped allocator), no region is left
// behind, and the last incarnation counted every prefetch that answered. Part of
// uma_reliability_tests, so the TSan build runs it.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include "support/reliability_fixture.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;

class caller_calls_race : public test::reliability_fixture {
 protected:
  /// Each of `threads` threads, `rounds` times: a block and a region (the message path), then
  /// every caller call on both. Returns the rounds whose calls all answered.
  std::uint64_t hammer(client& c, int threads, int rounds, std::atomic<std::uint64_t>& stopped) {
    std::atomic<std::uint64_t> ok{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        for (int i = 0; i < rounds; ++i) {
          try {
            auto block = c.allocate<float>(1024 + static_cast<std::size_t>(t));
            auto region = c.allocate<std::byte>(std::size_t{256} << 10);  // above the blocks
            const auto p =
                c.prefetch({client::erase(block), client::erase(region)}, {location::host()});
            EXPECT_EQ(p.ranges, 2u);
            (void)c.advise(block, i % 2 ? advice::set_read_mostly : advice::unset_read_mostly);
            (void)c.attributes(region);
            EXPECT_GE(c.stats().prefetches, 2u);
            ++ok;
          } catch (const error& e) {
            EXPECT_EQ(e.code(), errc::allocator_stopped) << e.what();
            ++stopped;
          }
        }
      });
    for (auto& w : workers)
      w.join();
    return ok.load();
  }
};

TEST_F(caller_calls_race, CallsReleasesAndRestartsTogether) {
  supervisor_config cfg;
  cfg.allocator.backend.instance = backend_;
  cfg.backoff_initial = 0ms;
  client c(sys_, cfg);
  c.set_max_block_bytes(std::size_t{64} << 10);
  std::atomic<std::uint64_t> stopped{0};
  std::thread restarts([&] {
    caf::scoped_actor self{sys_};
    for (int i = 0; i < 5; ++i)
      self->request(*c.supervisor(), 20s, restart_atom_v)
          .receive([](std::uint64_t) {}, [&](caf::error& e) { ADD_FAILURE() << sys_.render(e); });
  });
  const auto ok = hammer(c, 4, 150, stopped);
  restarts.join();
  EXPECT_EQ(ok + stopped.load(), 4u * 150u);
  EXPECT_GT(ok, 0u);
  const auto s = c.flush();
  EXPECT_EQ(s.generation, 6u);
  EXPECT_EQ(s.live_regions, s.live_leases);  // the block allocator's slabs; no region left
}

TEST_F(caller_calls_race, AStopWhileCallsRunAnswersEachAndFreesEverything) {
  auto c = std::make_unique<client>(sys_, host_config());
  c->set_max_block_bytes(std::size_t{64} << 10);
  std::atomic<std::uint64_t> stopped{0};
  std::thread stopper([&] {
    while (c->stats().prefetches < 40) {
    }
    (void)c->stop();
  });
  const auto ok = hammer(*c, 4, 200, stopped);
  stopper.join();
  EXPECT_EQ(ok + stopped.load(), 4u * 200u);
  EXPECT_GT(stopped.load(), 0u);
  const auto report = c->stop();
  ASSERT_TRUE(report);
  EXPECT_EQ(report->stop.regions_leaked, 0u);
  EXPECT_GE(report->stats.prefetches, 2 * ok);  // each round that answered prefetched two refs
}

}  // namespace
}  // namespace uma
