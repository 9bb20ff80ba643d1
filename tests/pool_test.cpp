#include <gtest/gtest.h>

#include <uma/memory/advice_state.hpp>
#include <uma/memory/backend_resource.hpp>
#include <uma/memory/coalesce.hpp>
#include <uma/memory/limit_resource.hpp>
#include <uma/memory/pool_resource.hpp>
#include "support/actor_fixture.hpp"

namespace uma {
namespace {

constexpr std::size_t KiB = 1024;

allocation_request req(std::size_t bytes) {
  return {bytes, 1, attach_flag::global, {}};
}

struct pool_fixture : ::testing::Test {
  std::shared_ptr<host_backend> host = std::make_shared<host_backend>();
  host_backend& backend = *host;
  backend_resource bottom{host};
  limit_resource limit{bottom, 4096 * KiB};
  pool_resource pool{limit, 1024 * KiB, 256 * KiB};
  ~pool_fixture() override { pool.release_all({}); }
};

TEST_F(pool_fixture, BlocksArePageAlignedAndPageRounded) {
  const auto a = pool.allocate(req(100));
  const auto b = pool.allocate(req(5000));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data) % 4096, 0u);
  EXPECT_EQ(a.charged, 4096u);
  EXPECT_EQ(b.charged, 8192u);
  EXPECT_EQ(b.data, a.data + 4096);  // adjacent in one slab
  EXPECT_EQ(pool.stats().slabs, 1u);
  EXPECT_EQ(pool.stats().used_bytes, 12288u);
  EXPECT_EQ(backend.counters().allocations, 1u);  // one slab, no call per block
  pool.deallocate(a);
  pool.deallocate(b);
}

TEST_F(pool_fixture, FreedNeighboursCoalesceIntoOneBlock) {
  const auto a = pool.allocate(req(64 * KiB));
  const auto b = pool.allocate(req(64 * KiB));
  const auto c = pool.allocate(req(64 * KiB));
  pool.deallocate(a);
  pool.deallocate(c);
  EXPECT_GT(pool.stats().fragmentation(), 0.0);
  pool.deallocate(b);  // joins a and c and the slab's tail
  EXPECT_EQ(pool.stats().largest_free, 1024 * KiB);
  EXPECT_EQ(pool.stats().fragmentation(), 0.0);
  const auto big = pool.allocate(req(256 * KiB));  // the largest block fits at the start again
  EXPECT_EQ(big.data, a.data);
  pool.deallocate(big);
}

TEST_F(pool_fixture, GrowsBySlabsAndTrimGivesEmptyOnesBack) {
  std::vector<allocation> blocks;
  for (int i = 0; i < 6; ++i)
    blocks.push_back(pool.allocate(req(256 * KiB)));
  EXPECT_EQ(pool.stats().slabs, 2u);
  EXPECT_EQ(pool.trim(), 0u);  // both slabs hold blocks
  for (auto& b : blocks)
    pool.deallocate(b);
  EXPECT_EQ(pool.trim(), 2u);
  EXPECT_EQ(backend.counters().frees, 2u);
  EXPECT_EQ(pool.stats().reserved_bytes, 0u);
  EXPECT_EQ(limit.held(), 0u);
  EXPECT_EQ(backend.counters().live_allocations, 0u);
}

TEST_F(pool_fixture, GrowthStopsAtTheLimitAfterGivingCachedSlabsBack) {
  std::vector<allocation> blocks;
  for (int i = 0; i < 16; ++i)
    blocks.push_back(pool.allocate(req(256 * KiB)));  // 4 MiB: the limit
  UMA_EXPECT_ERRC((void)pool.allocate(req(4 * KiB)), errc::quota_exceeded);
  EXPECT_EQ(limit.held(), 4096 * KiB);
  for (auto& b : blocks)
    pool.deallocate(b);
  const auto again = pool.allocate(req(4 * KiB));  // fits in a cached slab
  pool.deallocate(again);
}

TEST_F(pool_fixture, ALargeRequestOverCachedSlabsTrimsThemAndRetriesOnce) {
  std::vector<allocation> blocks;
  for (int i = 0; i < 16; ++i)
    blocks.push_back(pool.allocate(req(256 * KiB)));
  for (auto& b : blocks)
    pool.deallocate(b);  // 4 slabs cached: the limit is reached
  EXPECT_FALSE(pool.try_allocate(req(2048 * KiB)).has_value());  // needs a trim: not here
  const auto big = pool.allocate(req(2048 * KiB));               // trims, then retries
  EXPECT_FALSE(big.pooled());
  EXPECT_EQ(pool.stats().slabs, 0u);
  EXPECT_EQ(limit.held(), 2048 * KiB);
  pool.deallocate(big);
  EXPECT_EQ(limit.held(), 0u);
}

TEST_F(pool_fixture, TryAllocateNeverGrows) {
  EXPECT_FALSE(pool.try_allocate(req(4 * KiB)).has_value());
  EXPECT_EQ(backend.counters().allocations, 0u);
  const auto a = pool.allocate(req(4 * KiB));
  const auto b = pool.try_allocate(req(4 * KiB));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(backend.counters().allocations, 1u);
  pool.deallocate(*b);
  pool.deallocate(a);
}

TEST_F(pool_fixture, ABlockComingBackAfterReleaseAllIsIgnored) {
  const auto kept = pool.allocate(req(4 * KiB));
  const auto late = pool.allocate(req(600 * KiB));  // a second slab
  pool.release_all({kept.slab});
  EXPECT_EQ(pool.stats().slabs, 1u);
  pool.deallocate(late);  // its slab went back: nothing to do, nothing corrupted
  pool.deallocate(kept);
  EXPECT_EQ(backend.counters().bad_frees, 0u);
  EXPECT_EQ(backend.counters().live_allocations, 1u);  // the kept slab stays mapped
}

TEST(Coalesce, MergesAdjacentRangesOfOneAllocationGoingToOneLocation) {
  alignas(4096) static std::byte slab[8 * 4096];
  std::vector<keyed_range> in;
  for (int i : {3, 0, 1, 2})  // out of order on purpose
    in.push_back({7, {slab + i * 4096, 4096}, location::host()});
  in.push_back({7, {slab + 6 * 4096, 4096}, location::host()});  // a gap before it
  const auto out = coalesce(in);
  ASSERT_EQ(out.ranges.size(), 2u);
  EXPECT_EQ(out.ranges[0].ptr, slab);
  EXPECT_EQ(out.ranges[0].bytes, 4u * 4096);
  EXPECT_EQ(out.ranges[1].ptr, slab + 6 * 4096);
  EXPECT_EQ(out.locations, std::vector<location>{location::host()});  // broadcast
}

TEST(Coalesce, NeverMergesAcrossAllocationsOrLocations) {
  alignas(4096) static std::byte slab[4 * 4096];
  const auto out = coalesce({{1, {slab, 4096}, location::host()},
                             {2, {slab + 4096, 4096}, location::host()},
                             {1, {slab + 8192, 4096}, location::host_numa(0)}});
  EXPECT_EQ(out.ranges.size(), 3u);
  EXPECT_EQ(out.locations.size(), 3u);  // paired
}

TEST(AdviceState, KnowsWhatChangesNothing) {
  advice_state s;
  EXPECT_TRUE(s.unchanged_by(advice::unset_read_mostly, location::host()));
  EXPECT_FALSE(s.unchanged_by(advice::set_accessed_by, location::device(0)));
  s.apply(advice::set_accessed_by, location::device(0));
  EXPECT_TRUE(s.unchanged_by(advice::set_accessed_by, location::device(0)));
  EXPECT_FALSE(s.unchanged_by(advice::set_accessed_by, location::device(1)));
  s.known = false;
  EXPECT_FALSE(s.unchanged_by(advice::set_accessed_by, location::device(0)));
}

class pooled_allocator : public test::actor_fixture {
 protected:
  std::unique_ptr<client> pool_ = make_client(
      {.memory = {
           .policy = allocation_policy::pool, .slab_bytes = 4 << 20, .max_pooled_block = 1 << 20}});
};

TEST_F(pooled_allocator, SmallRequestsShareOneSlabAndReleaseWithoutBackendCalls) {
  std::vector<ManagedRef<float>> refs;
  for (int i = 0; i < 32; ++i)
    refs.push_back(pool_->allocate<float>(16 * 1024));
  auto s = pool_->stats();
  EXPECT_EQ(s.pool_slabs, 1u);
  EXPECT_EQ(s.live_regions, 32u);
  EXPECT_EQ(s.reserved_bytes, 4u << 20);
  EXPECT_EQ(backend_->counters().allocations, 1u);
  refs.clear();
  s = pool_->flush();
  EXPECT_EQ(s.live_regions, 0u);
  EXPECT_EQ(s.releases, 32u);
  EXPECT_EQ(backend_->counters().frees, 0u);  // cached in the pool
  EXPECT_EQ(pool_->trim(), 1u);
  EXPECT_EQ(pool_->flush().reserved_bytes, 0u);
  EXPECT_EQ(backend_->counters().frees, 1u);
}

TEST_F(pooled_allocator, AdjacentBlocksArePrefetchedAsOneRange) {
  std::vector<byte_ref> refs;
  for (int i = 0; i < 64; ++i)
    refs.push_back(client::erase(pool_->allocate<std::byte>(64 * 1024)));
  const auto res = pool_->prefetch(refs, {location::host_numa(0)});
  EXPECT_EQ(res.ranges, 64u);
  EXPECT_EQ(res.backend_ranges, 1u);
  EXPECT_EQ(pool_->stats().ranges_coalesced, 63u);
  EXPECT_EQ(backend_->counters().prefetch_calls, 1u);  // one range: no batch needed
  for (const auto& r : refs)
    EXPECT_EQ(pool_->attributes(r).last_prefetch_location, location::host_numa(0));
}

TEST_F(pooled_allocator, AdviceThatChangesNothingIsElided) {
  auto ref = pool_->allocate<float>(1024);
  pool_->advise(ref, advice::set_read_mostly);
  const auto calls = backend_->counters().advise_calls;
  const auto res = pool_->advise(ref, advice::set_read_mostly);
  EXPECT_EQ(res.backend_ranges, 0u);
  EXPECT_EQ(backend_->counters().advise_calls, calls);
  EXPECT_EQ(pool_->stats().advice_elided, 1u);
  // A sub-view makes the region's state unknown: nothing more is elided for it.
  pool_->advise({client::erase(ref.subview(0, 512))}, advice::set_read_mostly);
  pool_->advise(ref, advice::set_read_mostly);
  EXPECT_EQ(backend_->counters().advise_calls, calls + 2);
}

TEST_F(pooled_allocator, AReusedBlockComesBackWithoutItsPreviousAdvice) {
  auto first = pool_->allocate<float>(1024);
  pool_->advise(first, advice::set_read_mostly);
  pool_->advise(first, advice::set_preferred_location, location::host_numa(0));
  const auto* where = first.data();
  first.reset();
  (void)pool_->flush();
  auto second = pool_->allocate<float>(1024);
  ASSERT_EQ(second.data(), where);  // the same pages
  const auto a = pool_->attributes(second);
  EXPECT_FALSE(a.read_mostly);
  EXPECT_FALSE(a.preferred_location.has_value());
}

TEST_F(pooled_allocator, LargeRequestsGoDirect) {
  auto big = pool_->allocate<std::byte>(2 << 20);
  EXPECT_EQ(pool_->stats().pool_slabs, 0u);
  EXPECT_EQ(backend_->counters().allocations, 1u);
  big.reset();
  EXPECT_EQ(pool_->flush().live_regions, 0u);
  EXPECT_EQ(backend_->counters().frees, 1u);
}

TEST_F(pooled_allocator, StopFreesEverySlab) {
  auto a = pool_->allocate<int>(1024);
  auto b = pool_->allocate<int>(1024);
  pool_->stop();
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(a.stop_info()->regions_freed, 2u);
  EXPECT_EQ(backend_->counters().live_allocations, 0u);
  EXPECT_EQ(backend_->counters().bad_frees, 0u);
}

TEST_F(pooled_allocator, APinnedBlockPastTheDrainTimeoutKeepsItsWholeSlab) {
  auto c = make_client({.memory = {.policy = allocation_policy::pool, .slab_bytes = 1 << 20},
                        .supervision = {.drain_timeout = std::chrono::milliseconds(20)}});
  auto held = c->allocate<int>(1024);
  auto other = c->allocate<int>(1024);
  auto pin = held.pin();
  c->stop();
  EXPECT_EQ(held.stop_info()->regions_leaked, 1u);
  EXPECT_EQ(held.stop_info()->regions_freed, 1u);
  EXPECT_EQ(backend_->counters().live_allocations, 1u);  // the slab under the pin stays mapped
  pin[1023] = 9;
  EXPECT_EQ(pin[1023], 9);
}

}  // namespace
}  // namespace uma
