// The `pool` policy (memory/resource_stack.hpp): a typed request the block allocator serves is
// one of its blocks, taken on the actor's side (labelled when the request is); larger ones, and
// those a block cannot honour, are direct regions. Also the range helpers such blocks lean on
// (coalescing, advice elision).

#include <gtest/gtest.h>

#include <algorithm>

#include <uma/memory/advice_state.hpp>
#include <uma/memory/block_allocator.hpp>
#include <uma/memory/coalesce.hpp>
#include "support/actor_fixture.hpp"

namespace uma {
namespace {

constexpr std::size_t KiB = 1024;

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
  // The fixture's clients take the message path for every request (no fast path): each
  // allocate below is a typed request the actor serves.
  std::unique_ptr<client> pool_ = make_client(
      {.memory = {
           .policy = allocation_policy::pool, .slab_bytes = 4 << 20, .max_pooled_block = 1 << 20}});
};

TEST_F(pooled_allocator, ASmallRequestIsABlockAndOnlyTheFirstMissCallsTheBackend) {
  std::vector<ManagedRef<float>> refs;
  for (int i = 0; i < 32; ++i)
    refs.push_back(pool_->allocate<float>(16 * 1024));  // 64 KiB: a slab holds 64
  auto blocks = pool_->blocks()->stats();
  EXPECT_EQ(blocks.blocks_in_use, 32u);
  EXPECT_EQ(blocks.misses, 1u);
  EXPECT_EQ(blocks.hits, 31u);
  EXPECT_EQ(blocks.slabs, 1u);
  EXPECT_EQ(backend_->counters().allocations, 1u);  // one slab, no call per block
  auto s = pool_->stats();
  EXPECT_EQ(s.live_leases, 1u);
  EXPECT_EQ(s.leased_bytes, 4u << 20);
  EXPECT_EQ(s.live_regions, 1u);  // the slab: its blocks are no regions of their own
  EXPECT_EQ(s.reserved_bytes, 4u << 20);
  refs.clear();
  s = pool_->flush();
  blocks = pool_->blocks()->stats();
  EXPECT_EQ(blocks.blocks_in_use, 0u);
  EXPECT_EQ(blocks.free_bytes, 4u << 20);          // back on the free list
  EXPECT_EQ(backend_->counters().frees, 0u);       // cached in the block allocator
  auto again = pool_->allocate<float>(16 * 1024);  // a hit: no backend call
  EXPECT_EQ(pool_->blocks()->stats().hits, 32u);
  EXPECT_EQ(backend_->counters().allocations, 1u);
  again.reset();
  (void)pool_->flush();
  EXPECT_EQ(pool_->trim(), 4u << 20);  // the idle slab goes back
  EXPECT_EQ(pool_->flush().reserved_bytes, 0u);
  EXPECT_EQ(backend_->counters().frees, 1u);
  EXPECT_EQ(backend_->counters().live_allocations, 0u);
}

TEST_F(pooled_allocator, ALabelledRequestIsALabelledBlockInTheReport) {
  auto w = pool_->allocate<float>(1024, {.label = "weights"});
  const auto rows = pool_->regions();
  const auto row = std::find_if(rows.begin(), rows.end(),
                                [](const region_info& r) { return r.label == "weights"; });
  ASSERT_NE(row, rows.end());
  EXPECT_EQ(row->id, w.id());
  EXPECT_EQ(row->bytes, 4096u);
  const auto snap = pool_->snapshot();
  const auto in_snap = std::find_if(snap.regions.begin(), snap.regions.end(),
                                    [&](const region_snapshot& r) { return r.info.id == w.id(); });
  ASSERT_NE(in_snap, snap.regions.end());
  EXPECT_EQ(in_snap->policy, region_policy::block);
  EXPECT_EQ(pool_->blocks()->labelled_blocks().size(), 1u);
  w.reset();
  (void)pool_->flush();
  EXPECT_TRUE(pool_->blocks()->labelled_blocks().empty());
  for (const auto& r : pool_->regions())
    EXPECT_NE(r.label, "weights");
}

TEST_F(pooled_allocator, LargerRequestsAndWhatABlockCannotHonourGoDirect) {
  auto big = pool_->allocate<std::byte>(2 << 20);  // above max_pooled_block
  auto host = pool_->allocate<std::byte>(4096, {.attach = attach_flag::host});
  auto aligned = pool_->allocate<std::byte>(4096, {.alignment = 64 * KiB});
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(aligned.data()) % (64 * KiB), 0u);
  EXPECT_EQ(pool_->blocks()->stats().slabs, 0u);
  EXPECT_EQ(backend_->counters().allocations, 3u);
  const auto s = pool_->stats();
  EXPECT_EQ(s.live_regions, 3u);
  EXPECT_EQ(s.live_leases, 0u);
  for (const auto& r : pool_->snapshot().regions)
    EXPECT_EQ(r.policy, region_policy::direct);
  big.reset();
  host.reset();
  aligned.reset();
  EXPECT_EQ(pool_->flush().live_regions, 0u);
  EXPECT_EQ(backend_->counters().frees, 3u);
}

TEST_F(pooled_allocator, TheQuotaBoundsTheSlabsAndARefusalChangesNothing) {
  auto c = make_client({.memory = {.policy = allocation_policy::pool,
                                   .quota_bytes = 4 << 20,
                                   .slab_bytes = 4 << 20,
                                   .max_pooled_block = 1 << 20}});
  std::vector<ManagedRef<std::byte>> held;
  for (int i = 0; i < 64; ++i)
    held.push_back(c->allocate<std::byte>(64 * KiB));  // the one slab the quota allows, full
  const auto before = c->stats();
  UMA_EXPECT_ERRC((void)c->allocate<std::byte>(64 * KiB), errc::quota_exceeded);
  const auto after = c->stats();
  EXPECT_EQ(after.failures_of(errc::quota_exceeded), 1u);
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes);
  EXPECT_EQ(after.live_leases, 1u);
  EXPECT_EQ(c->blocks()->stats().blocks_in_use, 64u);
  EXPECT_EQ(backend_->counters().allocations, 1u);
  held.pop_back();
  (void)c->flush();
  EXPECT_TRUE(c->allocate<std::byte>(64 * KiB).valid());  // a freed block fits again
}

TEST_F(pooled_allocator, ARefusedSlabTakesTheIdleSlabsOfOtherSizesBack) {
  // Each size class carves slabs of its own, and an idle slab (every block free) stays cached:
  // a request of another class that the quota then refuses gets that quota back, as the pool
  // did when it gave its empty slabs back before it retried.
  auto c = make_client({.memory = {.policy = allocation_policy::pool,
                                   .quota_bytes = 6 << 20,
                                   .slab_bytes = 4 << 20,
                                   .max_pooled_block = 1 << 20}});
  (void)c->allocate<std::byte>(64 * KiB);  // a 4 MiB slab of its class, idle once dropped
  auto s = c->flush();
  ASSERT_EQ(s.reserved_bytes, 4u << 20);
  const auto other = c->allocate<std::byte>(1 << 20);  // another class: a slab of its own
  EXPECT_EQ(other.size(), 1u << 20);
  s = c->flush();
  EXPECT_EQ(s.failures_of(errc::quota_exceeded), 0u);
  EXPECT_EQ(c->blocks()->stats().slabs, 1u) << "the idle slab went back";
  EXPECT_LE(s.reserved_bytes, 6u << 20);
}

TEST_F(pooled_allocator, AdjacentBlocksArePrefetchedAsOneRange) {
  std::vector<byte_ref> refs;
  for (int i = 0; i < 64; ++i)  // one whole 4 MiB slab
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
  // A sub-view makes the block's state unknown: nothing more is elided for it.
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

TEST_F(pooled_allocator, StopFreesTheBlocksSlab) {
  auto a = pool_->allocate<int>(1024);
  auto b = pool_->allocate<int>(1024, {.label = "b"});
  pool_->stop();
  EXPECT_FALSE(a.valid());
  EXPECT_FALSE(b.valid());
  EXPECT_EQ(a.stop_info()->regions_leaked, 0u);
  EXPECT_EQ(backend_->counters().live_allocations, 0u);
  EXPECT_EQ(backend_->counters().bad_frees, 0u);
}

TEST_F(pooled_allocator, APinnedBlockPastTheDrainTimeoutKeepsItsWholeSlab) {
  auto c = make_client({.memory = {.policy = allocation_policy::pool, .slab_bytes = 1 << 20},
                        .supervision = {.drain_timeout = std::chrono::milliseconds(20)}});
  auto held = c->allocate<int>(1024);
  auto other = c->allocate<int>(1024);  // the same slab
  auto pin = held.pin();
  c->stop();
  EXPECT_EQ(held.stop_info()->regions_leaked, 1u);       // the slab under the pin
  EXPECT_EQ(backend_->counters().live_allocations, 1u);  // still mapped
  EXPECT_EQ(backend_->counters().bad_frees, 0u);
  pin[1023] = 9;
  EXPECT_EQ(pin[1023], 9);
}

}  // namespace
}  // namespace uma
