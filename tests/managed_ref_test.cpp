#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "support/actor_fixture.hpp"

namespace uma {
namespace {

/// The lifetime rules hold whichever way the facade allocates: through the caching layer (the
/// client's default: blocks of the block allocator) or as one message and one region per
/// allocation.
class lifetime : public test::actor_fixture, public ::testing::WithParamInterface<bool> {
 protected:
  lifetime() {
    if (cached())
      uma_->set_max_block_bytes(std::size_t{16} << 20);
  }
  [[nodiscard]] bool cached() const { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(facade, lifetime, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "cached" : "messages"; });

TEST(ManagedRefValue, EmptyRefIsNotValidAndHasNoData) {
  ManagedRef<float> ref;
  EXPECT_FALSE(ref.valid());
  EXPECT_TRUE(ref.empty());
  EXPECT_EQ(ref.data(), nullptr);
  EXPECT_EQ(ref.size(), 0u);
  UMA_EXPECT_ERRC((void)ref.pin(), errc::invalid_argument);
}

TEST_P(lifetime, ClonesDroppedAcrossManyThreadsFreeTheRegionExactlyOnce) {
  if (cached())
    GTEST_SKIP() << "counts the regions and backend frees of the message path (a cached block "
                    "lies in a slab; tests/block_allocator_test.cpp counts those)";
  for (int round = 0; round < 20; ++round) {
    auto ref = uma_->allocate<int>(64);
    std::vector<std::thread> threads;
    std::atomic<int> go{0};
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([copy = ref, &go]() mutable {
        while (go.load() == 0)
          std::this_thread::yield();
        for (int i = 0; i < 2000; ++i) {
          auto a = copy;
          auto b = a.subview(1, 2);
          auto c = std::move(a);
        }
        copy.reset();
      });
    ref.reset();
    go = 1;
    for (auto& t : threads)
      t.join();
  }
  const auto s = uma_->flush();
  EXPECT_EQ(s.allocations, 20u);
  EXPECT_EQ(s.releases, 20u);
  EXPECT_EQ(s.live_bytes, 0u);
  EXPECT_EQ(backend_->counters().frees, 20u);
  EXPECT_EQ(backend_->counters().bad_frees, 0u);
}

TEST_P(lifetime, StopTurnsOutstandingClonesInert) {
  auto ref = uma_->allocate<float>(100);
  auto clone = ref;
  auto view = ref.subview(50, 50);
  uma_->stop();
  for (const auto* r : {&ref, &clone, &view}) {
    EXPECT_FALSE(r->valid());
    EXPECT_EQ(r->data(), nullptr);
    UMA_EXPECT_ERRC((void)r->pin(), errc::allocator_stopped);
  }
  ASSERT_TRUE(ref.stop_info().has_value());
  EXPECT_EQ(ref.stop_info()->regions_freed, 1u);
  EXPECT_EQ(ref.stop_info()->regions_leaked, 0u);
  EXPECT_EQ(backend_->counters().frees, 1u);
  ref.reset();
  clone.reset();
  view.reset();  // dropping inert refs frees nothing more
  EXPECT_EQ(backend_->counters().frees, 1u);
  EXPECT_EQ(backend_->counters().bad_frees, 0u);
}

TEST_P(lifetime, RequestsNamingAnInertRefGetAllocatorStopped) {
  auto ref = uma_->allocate<float>(100);
  uma_->stop();
  auto next = make_client(host_config());
  UMA_EXPECT_ERRC(next->prefetch(ref, location::host()), errc::allocator_stopped);
  EXPECT_EQ(next->stats().inert_refusals, 1u);
}

TEST_P(lifetime, RequestsToAStoppedAllocatorFailClearly) {
  auto handle = uma_->handle();
  uma_->stop();
  client late(sys_, handle);
  UMA_EXPECT_ERRC((void)late.stats(), errc::allocator_stopped);
}

TEST_P(lifetime, AHeldPinDelaysTheFreeUntilReleased) {
  auto ref = uma_->allocate<int>(1024);
  auto pin = ref.pin();
  pin[0] = 42;
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    uma_->stop();  // waits for the pin (drain timeout is 5 s)
    stopped = true;
  });
  // The stopper is waiting on the pin: nothing may be freed while we read.
  while (ref.valid())
    std::this_thread::yield();  // stopping has begun
  EXPECT_EQ(pin[0], 42);
  EXPECT_EQ(backend_->counters().frees, 0u);
  EXPECT_FALSE(stopped.load());
  pin.release();
  stopper.join();
  EXPECT_EQ(backend_->counters().frees, 1u);
  EXPECT_TRUE(ref.stop_info()->pins_drained);
}

TEST_P(lifetime, APinOutlivingTheDrainTimeoutLeaksTheRegionAndReportsIt) {
  auto c = make_client({.supervision = {.drain_timeout = std::chrono::milliseconds(50)}});
  auto ref = c->allocate<int>(1024, {.label = "held"});
  auto pin = ref.pin();
  c->stop();
  const auto report = ref.stop_info();
  ASSERT_TRUE(report.has_value());
  EXPECT_FALSE(report->pins_drained);
  EXPECT_EQ(report->regions_leaked, 1u);
  EXPECT_EQ(report->bytes_leaked, 4096u);
  ASSERT_EQ(report->leaked_ids.size(), 1u);
  EXPECT_EQ(report->leaked_ids[0], ref.id());
  EXPECT_EQ(backend_->counters().frees, 0u);
  pin[1023] = 7;  // still mapped: never freed under a reader
  EXPECT_EQ(pin[1023], 7);
}

TEST_P(lifetime, PinFailsOnceStoppingHasBegun) {
  auto ref = uma_->allocate<int>(16);
  uma_->stop();
  EXPECT_FALSE(ref.try_pin().has_value());
}

TEST_P(lifetime, TypedViewsShareOwnership) {
  if (cached())
    GTEST_SKIP() << "counts the regions and backend frees of the message path (a cached block "
                    "lies in a slab; tests/block_allocator_test.cpp counts those)";
  auto bytes = uma_->allocate<std::byte>(64);
  auto ints = bytes.as<std::uint32_t>();
  EXPECT_EQ(ints.size(), 16u);
  auto tail = ints.subview(8, 8);
  bytes.reset();
  ints.reset();
  EXPECT_EQ(uma_->flush().live_regions, 1u);
  tail.pin()[7] = 5;
  UMA_EXPECT_ERRC((void)tail.subview(4, 5), errc::invalid_argument);
  UMA_EXPECT_ERRC((void)tail.as<double>().subview(0, 5), errc::invalid_argument);
  tail.reset();
  EXPECT_EQ(uma_->flush().live_regions, 0u);
}

TEST_P(lifetime, ReinterpretingToAnIncompatibleSizeIsRefused) {
  auto ref = uma_->allocate<std::byte>(10);
  UMA_EXPECT_ERRC((void)ref.as<std::uint32_t>(), errc::invalid_argument);
}

TEST_P(lifetime, RefsOutliveTheActorSystemSafely) {
  ManagedRef<int> survivor;
  {
    test::uma_config cfg;
    caf::actor_system sys{cfg};
    client c(sys, host_config());
    survivor = c.allocate<int>(8);
  }
  EXPECT_FALSE(survivor.valid());
  survivor.reset();
  EXPECT_EQ(backend_->counters().bad_frees, 0u);
}

}  // namespace
}  // namespace uma
