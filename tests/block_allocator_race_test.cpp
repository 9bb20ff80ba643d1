// The block allocator under threads (memory/block_allocator.hpp): one allocator shared by many
// threads hands no block out twice, advised blocks make their way back through the actor while
// others come and go, and a stop in the middle leaves nothing behind. Bounded in operations; no
// sleeps. Part of the TSan build (tools/setup.sh test).

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "support/reliability_fixture.hpp"

namespace uma {
namespace {

using block_allocator_race = test::reliability_fixture;

/// Which thread holds each block handed out now (a block in it twice is a double hand-out).
class owners {
 public:
  /// False when another thread holds `ref`'s block.
  bool take(const byte_ref& ref, int thread) {
    std::lock_guard lock(mutex_);
    return held_.emplace(ref.data(), thread).second;
  }
  void give(const byte_ref& ref) {
    std::lock_guard lock(mutex_);
    held_.erase(ref.data());
  }

 private:
  std::mutex mutex_;
  std::unordered_map<const std::byte*, int> held_;
};

TEST_F(block_allocator_race, EightThreadsShareOneAllocatorAndNoBlockIsHandedOutTwice) {
  constexpr int threads = 8;
  constexpr int iterations = 20'000;
  auto cache = uma_->blocks();
  owners owner;
  std::atomic<std::uint64_t> taken{0}, empty{0}, twice{0}, torn{0}, advised{0};
  std::vector<std::thread> pool;
  for (int t = 1; t <= threads; ++t)
    pool.emplace_back([&, t] {
      std::vector<byte_ref> held;
      for (int i = 0; i < iterations; ++i) {
        if (auto b = std::optional<byte_ref>(cache->allocate(64, 0, {}))) {
          if (!owner.take(*b, t))
            ++twice;  // somebody else holds this block
          {
            auto pin = b->as<std::uint64_t>().pin();
            pin[0] = static_cast<std::uint64_t>(t) << 32 | static_cast<std::uint32_t>(i);
            if (pin[0] >> 32 != static_cast<std::uint64_t>(t))
              ++torn;
          }
          ++taken;
          if (i % 997 == 0) {  // now and then: advice, so its drop goes through the allocator
            uma_->advise(*b, advice::set_read_mostly);
            ++advised;
          }
          held.push_back(std::move(*b));
        } else {
          ++empty;
        }
        if (held.size() > 3 || (!held.empty() && i % 3 == 0)) {
          auto& b = held.front();
          owner.give(b);
          held.erase(held.begin());
        }
      }
      for (auto& b : held)
        owner.give(b);
    });
  for (auto& th : pool)
    th.join();
  EXPECT_EQ(twice.load(), 0u);
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_GT(taken.load(), static_cast<std::uint64_t>(iterations));
  EXPECT_GT(advised.load(), 0u);
  EXPECT_EQ(empty.load(), 0u);
  (void)uma_->flush();  // advised blocks come back once their reset ran
  (void)uma_->flush();
  const auto c = cache->stats();
  EXPECT_EQ(c.blocks_in_use, 0u);
  EXPECT_GE(c.slabs, 1u);
  EXPECT_EQ(c.free_bytes, c.slabs_held_bytes);
  EXPECT_EQ(uma_->stats().allocations, c.slabs);  // the slabs; no block reached the stack
  EXPECT_EQ(cache->trim(), c.slabs_held_bytes);
  const auto s = uma_->flush();
  EXPECT_EQ(s.live_leases, 0u);
  EXPECT_EQ(s.live_regions, 0u);
}

TEST_F(block_allocator_race, AStopWhileThreadsAllocateLeavesNothingBehind) {
  constexpr int threads = 4;
  for (int round = 0; round < 20; ++round) {
    auto c = make_client(host_config());
    auto cache = c->blocks();
    std::atomic<bool> stopped{false};
    std::atomic<std::uint64_t> after_stop{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t, handle = c->handle()] {
        client mine(sys_, handle);  // its own facade: `c` is stopped (reset) under it
        std::vector<byte_ref> held;
        for (int i = 0; !stopped.load() || i % 64 != 0; ++i) {
          std::optional<byte_ref> b;
          try {
            b = cache->allocate(8, 0, {});
          } catch (const error& e) {
            EXPECT_EQ(e.code(), errc::allocator_stopped) << e.what();
          }
          if (b) {
            if (stopped.load() && !b->valid())
              ++after_stop;  // handed out as the stop happened: inert, and that is all
            if (auto pin = b->try_pin())
              pin->span()[0] = std::byte{static_cast<unsigned char>(t)};
            if ((i + t) % 101 == 0) {
              try {
                mine.advise(*b, advice::set_read_mostly);
              } catch (const error& e) {
                EXPECT_FALSE(b->valid()) << "refused while the allocator was alive: " << e.what();
              }
            }
            held.push_back(std::move(*b));
          }
          if (held.size() > 4)
            held.erase(held.begin());
        }
        held.clear();  // dropped after the stop
      });
    // Let the threads get going: wait until blocks have been taken, not for a time.
    while (cache->stats().hits == 0)
      std::this_thread::yield();
    c->stop();
    stopped = true;
    for (auto& th : pool)
      th.join();
    UMA_EXPECT_ERRC((void)cache->allocate(1, 0, {}), errc::allocator_stopped);
    const auto s = cache->stats();
    EXPECT_EQ(s.blocks_in_use, 0u);
    EXPECT_EQ(s.slabs, 0u);
  }
  EXPECT_EQ(backend_->counters().live_allocations, 0u);
  EXPECT_EQ(backend_->counters().bad_frees, 0u);
}

}  // namespace
}  // namespace uma
