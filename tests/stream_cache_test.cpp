// The caching layer (memory/stream_cache.hpp) over an allocator's block leases: reuse on the
// same stream at once, on another stream only after the event (a fake stream model whose events
// complete when the test says so), accounting, quota, stop, and the client facade's fast path.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include <caf/scoped_actor.hpp>

#include <uma/memory/stream_cache.hpp>
#include <uma/sys/fault_injecting_backend.hpp>

#include "support/actor_fixture.hpp"

namespace uma {
namespace {

const stream_view stream_a{reinterpret_cast<void*>(0x1000)};
const stream_view stream_b{reinterpret_cast<void*>(0x2000)};
const stream_view default_stream{};

class stream_cache_test : public test::actor_fixture {
 protected:
  stream_cache_test() {
    faults_->manual_events();
    uma_ = make_client(with_faults(0));
  }

  allocator_config with_faults(std::uint64_t quota) {
    allocator_config c;
    c.backend = faults_;
    c.quota_bytes = quota;
    return c;
  }

  allocator_config direct() {
    auto c = with_faults(0);
    c.policy = allocation_policy::direct;
    return c;
  }

  lease_source source() {
    return [this](std::size_t block, std::size_t blocks, std::string label) {
      return uma_->lease(block, blocks, std::move(label));
    };
  }

  stream_cache make(cache_mode mode) {
    stream_cache_config c;
    c.mode = mode;
    return stream_cache(source(), c);
  }

  std::shared_ptr<fault_injecting_backend> faults_ =
      std::make_shared<fault_injecting_backend>(backend_);
};

TEST_F(stream_cache_test, ABlockFreedOnAStreamIsReusedOnThatStreamAtOnce) {
  stream_cache_config c;
  c.mode = cache_mode::raw;
  stream_cache cache(source(), c);
  void* p = cache.allocate_raw(65536, 0, stream_a);
  ASSERT_EQ(cache.release_raw(p, 65536, 0, stream_a), raw_release::ok);
  EXPECT_EQ(cache.allocate_raw(65536, 0, stream_a), p);
  const auto s = cache.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.cross_stream_reuses, 0u);
  EXPECT_EQ(cache.release_raw(p, 0, 0, stream_a), raw_release::ok);
}

TEST_F(stream_cache_test, AnotherStreamGetsTheBlockOnlyOnceTheEventRecordedAtTheFreeCompleted) {
  auto cache = make(cache_mode::raw);
  void* p = cache.allocate_raw(65536, 0, stream_a);
  ASSERT_EQ(cache.release_raw(p, 65536, 0, stream_a), raw_release::ok);
  EXPECT_EQ(faults_->events_recorded(), 1u);  // a user stream: recorded at the free
  void* q = cache.allocate_raw(65536, 0, stream_b);
  EXPECT_NE(q, p);  // the event has not completed: stream A may still use p
  faults_->complete_stream(stream_a);
  void* r = cache.allocate_raw(65536, 0, stream_b);
  EXPECT_EQ(r, p);
  EXPECT_EQ(cache.stats().cross_stream_reuses, 1u);
  EXPECT_EQ(cache.release_raw(q, 0, 0, stream_b), raw_release::ok);
  EXPECT_EQ(cache.release_raw(r, 0, 0, stream_b), raw_release::ok);
}

TEST_F(stream_cache_test, OnTheDefaultStreamTheEventIsRecordedWhenAnotherStreamAsks) {
  auto cache = make(cache_mode::raw);
  void* p = cache.allocate_raw(8192, 0, default_stream);
  ASSERT_EQ(cache.release_raw(p, 0, 0, default_stream), raw_release::ok);
  EXPECT_EQ(faults_->events_recorded(), 0u);  // the hot path records nothing
  void* q = cache.allocate_raw(8192, 0, stream_b);
  EXPECT_NE(q, p);
  EXPECT_EQ(faults_->events_recorded(), 1u);  // recorded after the free, so it covers it
  faults_->complete_stream(default_stream);
  EXPECT_EQ(cache.allocate_raw(8192, 0, stream_b), p);
  EXPECT_EQ(cache.release_raw(p, 0, 0, stream_b), raw_release::ok);
  EXPECT_EQ(cache.release_raw(q, 0, 0, stream_b), raw_release::ok);
}

TEST_F(stream_cache_test, ARawReleaseOfABadPointerChangesNothing) {
  auto cache = make(cache_mode::raw);
  auto* p = static_cast<std::byte*>(cache.allocate_raw(5000, 0, stream_a));
  int local = 0;
  EXPECT_EQ(cache.release_raw(&local, 0, 0, stream_a), raw_release::unknown_pointer);
  EXPECT_EQ(cache.release_raw(p + 4096, 0, 0, stream_a), raw_release::unknown_pointer);
  EXPECT_EQ(cache.release_raw(p, 4999, 0, stream_a), raw_release::size_mismatch);
  EXPECT_EQ(cache.stats().blocks_in_use, 1u);
  EXPECT_EQ(cache.release_raw(p, 5000, 0, stream_a), raw_release::ok);
  EXPECT_EQ(cache.release_raw(p, 5000, 0, stream_a), raw_release::unknown_pointer);
  EXPECT_EQ(cache.stats().blocks_in_use, 0u);
}

TEST_F(stream_cache_test, EveryBlockCountsInTheAllocatorsLiveBytesAndReport) {
  auto cache = make(cache_mode::refs);
  auto a = cache.allocate(100, 0, stream_a);
  auto b = cache.allocate(300000, 0, stream_a);
  const auto s = cache.stats();
  EXPECT_EQ(s.blocks_in_use, 2u);
  EXPECT_EQ(s.requested_bytes, 300100u);
  EXPECT_EQ(s.in_use_bytes, 4096u + 327680u);  // a page, and the 80-page class
  EXPECT_EQ(s.leases, 2u);
  const auto stats = uma_->stats();
  EXPECT_EQ(stats.live_bytes, s.leased_bytes);
  EXPECT_EQ(s.leased_bytes, s.in_use_bytes + s.free_bytes);
  EXPECT_EQ(stats.live_leases, 2u);
  const auto regions = uma_->regions();
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_NE(regions[0].label.find("cache"), std::string::npos);
}

TEST_F(stream_cache_test, TrimGivesBackOnlyLeasesWhoseBlocksAreAllFreeAndFinished) {
  uma_ = make_client(direct());  // every lease its own region: live bytes follow it exactly
  auto cache = make(cache_mode::refs);
  auto kept = cache.allocate(100, 0, stream_a);
  auto dropped = cache.allocate(300000, 0, stream_a);
  const auto before = cache.stats();
  ASSERT_EQ(before.leases, 2u);
  dropped = {};  // freed on stream A: its event has not completed
  EXPECT_EQ(cache.trim(), 0u);
  EXPECT_EQ(cache.stats().leases, 2u);
  EXPECT_EQ(uma_->stats().live_bytes, before.leased_bytes);
  faults_->complete_stream(stream_a);
  const auto released = cache.trim();
  const auto after = cache.stats();
  EXPECT_EQ(after.leases, 1u);  // the lease of the block still out stays
  EXPECT_EQ(released, before.leased_bytes - after.leased_bytes);
  EXPECT_GE(released, 327680u);
  EXPECT_EQ(after.free_bytes + after.in_use_bytes, after.leased_bytes);
  EXPECT_EQ(uma_->flush().live_bytes, after.leased_bytes);  // the lease went back
  EXPECT_EQ(cache.trim(), 0u);                              // nothing idle is left
  auto again = cache.allocate(300000, 0, stream_b);         // a new lease serves it
  EXPECT_EQ(cache.stats().misses, before.misses + 1);
  EXPECT_TRUE(kept.valid());
}

TEST_F(stream_cache_test, APointerOfATrimmedRawLeaseIsUnknownAfterwards) {
  uma_ = make_client(direct());
  auto cache = make(cache_mode::raw);
  void* p = cache.allocate_raw(65536, 0, default_stream);
  ASSERT_EQ(cache.release_raw(p, 65536, 0, default_stream), raw_release::ok);
  EXPECT_EQ(cache.trim(), 0u);  // the default stream's event, recorded now, has not completed
  faults_->complete_stream(default_stream);
  EXPECT_GT(cache.trim(), 0u);
  EXPECT_EQ(cache.stats().leases, 0u);
  EXPECT_EQ(cache.release_raw(p, 65536, 0, default_stream), raw_release::unknown_pointer);
  EXPECT_TRUE(cache.ref_of(p, 1).empty());
  EXPECT_EQ(uma_->flush().live_bytes, 0u);
}

TEST_F(stream_cache_test, AnAdvisedRawBlockLeavesTheCacheWithItsAdviceResetNotToTheNextUser) {
  auto cache = make(cache_mode::raw);
  void* p = cache.allocate_raw(65536, 0, stream_a);
  uma_->advise(cache.ref_of(p, 65536), advice::set_read_mostly);
  ASSERT_TRUE(faults_->attributes({p, 65536}).read_mostly);
  ASSERT_EQ(cache.release_raw(p, 65536, 0, stream_a), raw_release::ok);
  EXPECT_EQ(cache.stats().blocks_in_use, 0u);
  EXPECT_EQ(cache.stats().in_use_bytes, 0u);
  void* q = cache.allocate_raw(65536, 0, stream_a);
  EXPECT_NE(q, p);      // not handed out again: it went back to its lease
  (void)uma_->flush();  // the reset ran on a lane
  EXPECT_FALSE(faults_->attributes({p, 65536}).read_mostly);
  EXPECT_EQ(cache.release_raw(p, 65536, 0, stream_a), raw_release::unknown_pointer);
  EXPECT_EQ(cache.release_raw(q, 65536, 0, stream_a), raw_release::ok);
}

TEST_F(stream_cache_test, ALeaseThePolicyCannotHoldIsRefusedWithTheQuotaError) {
  uma_ = make_client(with_faults(std::uint64_t{3} << 20));
  auto cache = make(cache_mode::refs);
  UMA_EXPECT_ERRC((void)cache.allocate(65536, 0, stream_a), errc::quota_exceeded);
  EXPECT_EQ(cache.stats().leases, 0u);
  EXPECT_EQ(uma_->stats().live_bytes, 0u);
}

TEST_F(stream_cache_test, BlocksOfAStoppedAllocatorAreInertAndNeverHandedOutAgain) {
  auto cache = make(cache_mode::refs);
  auto kept = cache.allocate(65536, 0, stream_a);
  { auto dropped = cache.allocate(65536, 0, stream_a); }
  ASSERT_TRUE(kept.valid());
  uma_->stop();
  EXPECT_FALSE(kept.valid());
  EXPECT_EQ(kept.data(), nullptr);
  UMA_EXPECT_ERRC((void)kept.pin(), errc::allocator_stopped);
  EXPECT_THROW((void)cache.allocate(65536, 0, stream_a), error);
}

TEST_F(stream_cache_test, TheFacadeServesSmallRequestsFromTheCacheWithRefSemantics) {
  uma_->set_cache_max_bytes(std::size_t{16} << 20);  // the client's default (the fixture's is 0)
  auto ref = uma_->allocate<float>(1000);
  EXPECT_EQ(uma_->cache_stats().misses, 1u);
  {
    auto pin = ref.pin();
    pin[999] = 2.5f;
  }
  auto view = ref.subview(990, 10);
  EXPECT_EQ(view.pin()[9], 2.5f);
  const auto first = ref.data();
  ref.reset();
  EXPECT_TRUE(view.valid());  // the view still holds the block
  view.reset();
  auto again = uma_->allocate<float>(1000);
  EXPECT_EQ(again.data(), first);  // back in the cache on the last drop, reused
  EXPECT_EQ(uma_->cache_stats().hits, 1u);
  auto labelled = uma_->allocate<float>(1000, {.label = "named"});  // the message path
  EXPECT_EQ(uma_->cache_stats().hits + uma_->cache_stats().misses, 2u);
  EXPECT_EQ(uma_->stats().live_regions, 2u);  // the lease and the labelled region
  uma_->stop();
  EXPECT_FALSE(again.valid());
  EXPECT_FALSE(labelled.valid());
}

TEST_F(stream_cache_test, ManyThreadsDroppingEachOthersBlocksLoseNone) {
  const auto leases_before = detail::lease_state::live_count();
  {
    auto cache = make(cache_mode::refs);
    std::vector<byte_ref> shared(64);
    std::vector<std::thread> threads;
    std::atomic<bool> bad{false};
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 2000; ++i) {
          auto ref = cache.allocate(4096 * (1 + (i + t) % 20), 0, t % 2 ? stream_a : stream_b);
          auto pin = ref.pin();
          pin[0] = std::byte(t);
          if (pin[0] != std::byte(t))
            bad = true;
          if (i % 3 == 0)
            shared[(i * 8 + t) % 64] = std::move(ref);  // dropped later by another thread
        }
      });
    for (auto& t : threads)
      t.join();
    EXPECT_FALSE(bad);
    shared.clear();
    faults_->complete_stream(stream_a);
    faults_->complete_stream(stream_b);
    const auto s = cache.stats();
    EXPECT_EQ(s.blocks_in_use, 0u);
    EXPECT_EQ(s.in_use_bytes, 0u);
    EXPECT_EQ(s.free_bytes, s.leased_bytes);
    EXPECT_EQ(uma_->stats().live_bytes, s.leased_bytes);
  }
  uma_->stop();
  EXPECT_EQ(detail::lease_state::live_count(), leases_before);  // every lease ended
}

TEST_F(stream_cache_test, AfterARestartTheFacadeServesBlocksOfTheNewGeneration) {
  supervisor_config cfg;
  cfg.allocator = with_faults(0);
  client c(sys_, cfg);
  auto old_ref = c.allocate<float>(1000);
  EXPECT_EQ(old_ref.generation(), 1u);
  { auto dropped = c.allocate<float>(1000); }  // a free block of generation 1 in the cache
  caf::scoped_actor self{sys_};
  std::uint64_t generation = 0;
  self->request(*c.supervisor(), caf::infinite, restart_atom_v)
      .receive([&](std::uint64_t g) { generation = g; }, [](caf::error&) {});
  ASSERT_EQ(generation, 2u);
  EXPECT_FALSE(old_ref.valid());
  auto fresh = c.allocate<float>(1000);
  EXPECT_TRUE(fresh.valid());
  EXPECT_EQ(fresh.generation(), 2u);
  EXPECT_EQ(c.cache_stats().misses, 2u);  // a lease from each generation
  EXPECT_EQ(c.cache_stats().leases, 1u);  // the old one let go
  old_ref.reset();                        // an inert block leaves the counters
  EXPECT_EQ(c.cache_stats().blocks_in_use, 1u);
  EXPECT_EQ(c.cache_stats().requested_bytes, 4000u);
}

}  // namespace
}  // namespace uma
