// The client-side fast path (memory/block_cache.hpp): a lease is one region of the allocator,
// blocks come and go without messages, and every ref rule (inert on stop, pins, requests, advice
// reset) holds for blocks too.

#include <gtest/gtest.h>

#include <set>

#include <uma/actors/allocator_supervisor.hpp>
#include "support/actor_fixture.hpp"

namespace uma {
namespace {

constexpr std::size_t KiB = 1024;

class block_lease : public test::actor_fixture {
 protected:
  std::unique_ptr<client> pool_ = make_client(
      {.policy = allocation_policy::pool, .slab_bytes = 4 << 20, .max_pooled_block = 1 << 20});
};

TEST_F(block_lease, IsOneRegionAndHandsOutBlocksWithoutMessages) {
  auto cache = pool_->lease(60 * KiB + 1, 8, "fast");
  EXPECT_TRUE(cache.valid());
  EXPECT_EQ(cache.block_bytes(), 64 * KiB);  // page-rounded
  EXPECT_EQ(cache.capacity(), 8u);
  EXPECT_EQ(cache.available(), 8u);
  auto s = pool_->stats();
  EXPECT_EQ(s.allocations, 1u);
  EXPECT_EQ(s.live_regions, 1u);
  EXPECT_EQ(s.live_leases, 1u);
  EXPECT_EQ(s.leased_bytes, 512 * KiB);
  EXPECT_EQ(s.live_bytes, 512 * KiB);
  const auto report = pool_->regions();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].id, cache.lease_id());
  EXPECT_NE(report[0].label.find("lease: 8 x"), std::string::npos) << report[0].label;
  EXPECT_NE(report[0].label.find("fast"), std::string::npos);

  std::vector<byte_ref> blocks;
  std::set<std::uint64_t> ids;
  for (int i = 0; i < 8; ++i) {
    auto b = cache.try_allocate(60 * KiB + 1);
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->size(), 60 * KiB + 1);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b->data()) % 4096, 0u);
    ids.insert(b->id());
    blocks.push_back(std::move(*b));
  }
  EXPECT_EQ(ids.size(), 8u);
  EXPECT_EQ(ids.count(cache.lease_id()), 0u);
  EXPECT_FALSE(cache.try_allocate(1).has_value());  // every block is out
  EXPECT_EQ(cache.available(), 0u);
  // Blocks do not overlap.
  std::vector<std::byte*> starts;
  for (const auto& b : blocks)
    starts.push_back(b.data());
  std::sort(starts.begin(), starts.end());
  for (std::size_t i = 1; i < starts.size(); ++i)
    EXPECT_GE(starts[i] - starts[i - 1], static_cast<std::ptrdiff_t>(64 * KiB));

  auto* first = blocks[3].data();
  blocks[3].reset();
  EXPECT_EQ(cache.available(), 1u);
  auto again = cache.try_allocate(100);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->data(), first);  // the block just given back
  s = pool_->flush();
  EXPECT_EQ(s.allocations, 1u);  // none of this reached the allocator
  EXPECT_EQ(s.releases, 0u);
  EXPECT_EQ(backend_->counters().allocations, 1u);
}

TEST_F(block_lease, BlocksAreOrdinaryRefs) {
  auto cache = pool_->lease(64 * KiB, 4);
  auto a = cache.try_allocate_n<float>(16 * 1024).value();
  auto b = cache.try_allocate_n<float>(16 * 1024).value();
  {
    auto pin = a.pin();
    pin[0] = 1.5f;
    pin[16 * 1024 - 1] = 2.5f;
  }
  const auto view = a.subview(1, 10);
  EXPECT_EQ(view.size(), 10u);
  EXPECT_EQ(a.pin()[16 * 1024 - 1], 2.5f);
  // Blocks of one lease are adjacent: a batched prefetch reaches the backend as one range.
  const auto res = pool_->prefetch({client::erase(b), client::erase(a)}, {location::host_numa(0)});
  EXPECT_EQ(res.ranges, 2u);
  EXPECT_EQ(res.backend_ranges, 1u);
  EXPECT_EQ(pool_->attributes(a).last_prefetch_location, location::host_numa(0));
  EXPECT_TRUE(pool_->can_access(location::host(), a));
  EXPECT_EQ(pool_->discard({client::erase(a)}).bytes, 64 * KiB);
}

TEST_F(block_lease, AdviceOnABlockIsElidedAndResetBeforeTheBlockIsReused) {
  auto cache = pool_->lease(64 * KiB, 2);
  auto blk = cache.try_allocate(64 * KiB).value();
  auto* where = blk.data();
  pool_->advise(blk, advice::set_read_mostly);
  const auto calls = backend_->counters().advise_calls;
  EXPECT_EQ(pool_->advise(blk, advice::set_read_mostly).backend_ranges, 0u);
  EXPECT_EQ(backend_->counters().advise_calls, calls);
  EXPECT_TRUE(pool_->attributes(blk).read_mostly);
  blk.reset();                       // advised: goes back through the allocator
  EXPECT_EQ(cache.available(), 1u);  // not yet: the allocator resets it first
  (void)pool_->flush();
  EXPECT_EQ(cache.available(), 2u);
  auto next = cache.try_allocate(64 * KiB).value();
  ASSERT_EQ(next.data(), where);
  EXPECT_FALSE(pool_->attributes(next).read_mostly);
}

TEST_F(block_lease, EndsWhenTheLastHandleAndBlockAreGone) {
  auto cache = pool_->lease(4 * KiB, 4);
  auto blk = cache.try_allocate(10).value();
  auto copy = cache;
  cache.reset();
  copy.reset();
  EXPECT_EQ(pool_->flush().live_leases, 1u);  // the block still holds the lease
  EXPECT_TRUE(blk.valid());
  blk.reset();
  const auto s = pool_->flush();
  EXPECT_EQ(s.live_leases, 0u);
  EXPECT_EQ(s.leased_bytes, 0u);
  EXPECT_EQ(s.live_regions, 0u);
  EXPECT_EQ(s.live_bytes, 0u);
}

TEST_F(block_lease, StopMakesBlocksAndTheCacheInertAndFreesTheLease) {
  auto cache = pool_->lease(64 * KiB, 4);
  auto blk = cache.try_allocate(64 * KiB).value();
  auto advised = cache.try_allocate(64 * KiB).value();
  pool_->advise(advised, advice::set_read_mostly);
  pool_->stop();
  EXPECT_FALSE(blk.valid());
  EXPECT_EQ(blk.data(), nullptr);
  EXPECT_FALSE(cache.valid());
  EXPECT_FALSE(cache.try_allocate(1).has_value());
  UMA_EXPECT_ERRC((void)blk.pin(), errc::allocator_stopped);
  EXPECT_EQ(blk.stop_info()->regions_freed, 1u);  // the lease's backing region
  EXPECT_EQ(backend_->counters().live_allocations, 0u);
  EXPECT_EQ(backend_->counters().bad_frees, 0u);
  blk.reset();  // after the stop: nothing freed twice, the lease's host state goes away
  advised.reset();
  cache.reset();
  EXPECT_EQ(backend_->counters().bad_frees, 0u);
}

TEST_F(block_lease, APinnedBlockPastTheDrainTimeoutLeaksItsLeaseNotMore) {
  auto c = make_client({.drain_timeout = std::chrono::milliseconds(20)});  // direct policy
  auto cache = c->lease(4 * KiB, 8);
  auto other = c->allocate<int>(1024);
  auto blk = cache.try_allocate_n<int>(1024).value();
  auto pin = blk.pin();
  EXPECT_EQ(c->regions()[0].pins, 1);  // counted on the lease's region
  c->stop();
  const auto report = *blk.stop_info();
  EXPECT_EQ(report.regions_leaked, 1u);
  ASSERT_EQ(report.leaked_ids.size(), 1u);
  EXPECT_EQ(report.leaked_ids[0], cache.lease_id());
  EXPECT_EQ(report.regions_freed, 1u);
  EXPECT_EQ(backend_->counters().live_allocations, 1u);  // the pinned lease stays mapped
  pin[1023] = 7;
  EXPECT_EQ(pin[1023], 7);
}

TEST_F(block_lease, BadRequestsNameWhatIsWrongAndChangeNothing) {
  auto c = make_client({.quota_bytes = 1 << 20});
  UMA_EXPECT_ERROR((void)c->lease(0, 4), errc::invalid_argument, "zero-size");
  UMA_EXPECT_ERROR((void)c->lease(4096, 0), errc::invalid_argument, "0 blocks of 4096");
  UMA_EXPECT_ERROR((void)c->lease(SIZE_MAX, 2), errc::overflow, "overflow");
  UMA_EXPECT_ERROR((void)c->lease(SIZE_MAX / 2, 3), errc::overflow, "overflow");
  UMA_EXPECT_ERROR((void)c->lease(4096, std::size_t{1} << 33), errc::invalid_argument,
                   "at most 4294967294");
  UMA_EXPECT_ERROR((void)c->lease(64 * KiB, 64), errc::quota_exceeded, "quota");
  const auto s = c->stats();
  EXPECT_EQ(s.allocations, 0u);
  EXPECT_EQ(s.live_leases, 0u);
  EXPECT_EQ(backend_->counters().allocations, 0u);

  auto cache = c->lease(4096, 2);
  UMA_EXPECT_ERROR((void)cache.try_allocate(0), errc::invalid_argument, "1 to 4096 bytes");
  UMA_EXPECT_ERROR((void)cache.try_allocate(4097), errc::invalid_argument, "4097 bytes");
  UMA_EXPECT_ERROR((void)cache.try_allocate_n<double>(SIZE_MAX / 4), errc::overflow, "overflow");
  block_cache none;
  UMA_EXPECT_ERROR((void)none.try_allocate(1), errc::invalid_argument, "empty");
  EXPECT_EQ(cache.available(), 2u);
}

TEST_F(block_lease, ARefFromAnotherGenerationIsRefused) {
  auto a = make_client({});
  auto b = make_client({.generation = 2});
  auto cache = a->lease(4096, 1);
  auto blk = cache.try_allocate(4096).value();
  UMA_EXPECT_ERRC(b->prefetch({blk}, {location::host()}), errc::invalid_argument);
}

TEST_F(block_lease, WorksThroughTheSupervisorAndGoesInertWhenItStops) {
  supervisor_config sc;
  sc.allocator.backend = backend_;
  auto sup = spawn_supervisor(sys_, sc);
  client c{sys_, caf::actor_cast<managed_allocator_actor>(sup)};
  auto cache = c.lease(4096, 4);
  auto blk = cache.try_allocate(4096).value();
  EXPECT_EQ(cache.generation(), 1u);
  caf::anon_send_exit(sup, caf::exit_reason::user_shutdown);
  caf::scoped_actor self{sys_};
  self->wait_for(sup);
  EXPECT_FALSE(blk.valid());
  EXPECT_FALSE(cache.try_allocate(1).has_value());
}

}  // namespace
}  // namespace uma
