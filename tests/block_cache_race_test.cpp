// The client-side fast path under threads (memory/block_cache.hpp): one lease shared by many
// threads hands no block out twice, advised blocks make their way back through the allocator
// while others come and go, and a stop in the middle leaves nothing behind. Bounded in
// operations; no sleeps. Part of the TSan build (tools/setup.sh test).

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "support/reliability_fixture.hpp"

namespace uma {
namespace {

using block_cache_race = test::reliability_fixture;

constexpr std::size_t block_bytes = 4096;
constexpr std::size_t blocks = 32;

/// The block index of `ref` in a lease starting at `base`.
std::size_t index_of(const byte_ref& ref, const std::byte* base) {
  return static_cast<std::size_t>(ref.data() - base) / block_bytes;
}

TEST_F(block_cache_race, EightThreadsShareOneLeaseAndNoBlockIsHandedOutTwice) {
  constexpr int threads = 8;
  constexpr int iterations = 20'000;
  const auto live_before = detail::lease_state::live_count();
  auto cache = uma_->lease(block_bytes, blocks);
  // The lowest block address (blocks are handed out lowest first from a fresh lease).
  const std::byte* base = nullptr;
  {
    auto probe = cache.try_allocate(1).value();
    base = probe.data();
  }
  std::vector<std::atomic<int>> owner(blocks);
  std::atomic<std::uint64_t> taken{0}, empty{0}, twice{0}, torn{0}, advised{0};
  std::vector<std::thread> pool;
  for (int t = 1; t <= threads; ++t)
    pool.emplace_back([&, t] {
      std::vector<byte_ref> held;
      for (int i = 0; i < iterations; ++i) {
        if (auto b = cache.try_allocate(64)) {
          const auto k = index_of(*b, base);
          int expected = 0;
          if (!owner[k].compare_exchange_strong(expected, t))
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
          owner[index_of(b, base)].store(0);
          held.erase(held.begin());
        }
      }
      for (auto& b : held)
        owner[index_of(b, base)].store(0);
    });
  for (auto& th : pool)
    th.join();
  EXPECT_EQ(twice.load(), 0u);
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_GT(taken.load(), static_cast<std::uint64_t>(iterations));
  EXPECT_GT(advised.load(), 0u);
  (void)uma_->flush();  // advised blocks come back once their reset ran
  (void)uma_->flush();
  EXPECT_EQ(cache.available(), blocks);
  EXPECT_EQ(uma_->stats().allocations, 1u);  // the lease; no block reached the allocator
  cache.reset();
  const auto s = uma_->flush();
  EXPECT_EQ(s.live_leases, 0u);
  EXPECT_EQ(s.live_regions, 0u);
  EXPECT_EQ(detail::lease_state::live_count(), live_before);
}

TEST_F(block_cache_race, AStopWhileThreadsUseALeaseLeavesNothingBehind) {
  constexpr int threads = 4;
  const auto live_before = detail::lease_state::live_count();
  for (int round = 0; round < 20; ++round) {
    auto c = make_client(host_config());
    auto cache = c->lease(block_bytes, blocks);
    std::atomic<bool> stopped{false};
    std::atomic<std::uint64_t> after_stop{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t, handle = c->handle()] {
        client mine(sys_, handle);  // its own facade: `c` is stopped (reset) under it
        std::vector<byte_ref> held;
        for (int i = 0; !stopped.load() || i % 64 != 0; ++i) {
          if (auto b = cache.try_allocate(8)) {
            if (stopped.load() && !b->valid())
              ++after_stop;  // handed out as the stop happened: inert, and that is all
            if (auto pin = b->try_pin())
              pin->span()[0] = std::byte{static_cast<unsigned char>(t)};
            if ((i + t) % 101 == 0) {
              try {
                mine.advise(*b, advice::set_read_mostly);
              } catch (const error& e) {
                EXPECT_FALSE(cache.valid())
                    << "refused while the allocator was alive: " << e.what();
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
    while (cache.available() == blocks)
      std::this_thread::yield();
    c->stop();
    stopped = true;
    for (auto& th : pool)
      th.join();
    EXPECT_FALSE(cache.valid());
    EXPECT_FALSE(cache.try_allocate(1).has_value());
    cache.reset();
  }
  EXPECT_EQ(detail::lease_state::live_count(), live_before);
  EXPECT_EQ(backend_->counters().live_allocations, 0u);
  EXPECT_EQ(backend_->counters().bad_frees, 0u);
}

}  // namespace
}  // namespace uma
