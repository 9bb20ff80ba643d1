#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <numeric>
#include <thread>

#include <caf/scoped_actor.hpp>

#include "support/actor_fixture.hpp"

namespace uma {
namespace {

using test::actor_fixture;
using allocator = actor_fixture;

TEST_F(allocator, AllocateReturnsAValidTypedRefAndCountsIt) {
  auto ref = uma_->allocate<float>(1000, {.label = "weights"});
  ASSERT_TRUE(ref.valid());
  EXPECT_EQ(ref.size(), 1000u);
  EXPECT_EQ(ref.bytes(), 4000u);
  EXPECT_EQ(ref.generation(), 1u);
  EXPECT_NE(ref.id(), 0u);
  auto pin = ref.pin();
  std::iota(pin.begin(), pin.end(), 0.0f);
  EXPECT_EQ(pin[999], 999.0f);

  const auto s = uma_->stats();
  EXPECT_EQ(s.backend, "host");
  EXPECT_EQ(s.allocations, 1u);
  EXPECT_EQ(s.live_regions, 1u);
  EXPECT_EQ(s.live_bytes, 4000u);
  EXPECT_EQ(s.peak_bytes, 4000u);
  EXPECT_EQ(backend_->counters().live_allocations, 1u);
}

TEST_F(allocator, RegionsReportListsLabelsSizesAndHolders) {
  auto a = uma_->allocate<double>(10, {.label = "a"});
  auto b = uma_->allocate<char>(3, {.label = "b"});
  auto b2 = b;
  const auto rows = uma_->regions();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].label, "a");
  EXPECT_EQ(rows[0].bytes, 80u);
  EXPECT_EQ(rows[0].refs, 1);
  EXPECT_EQ(rows[1].label, "b");
  EXPECT_EQ(rows[1].refs, 2);
  EXPECT_EQ(rows[1].generation, 1u);
}

TEST_F(allocator, ZeroSizeRequestsAreInvalidArguments) {
  UMA_EXPECT_ERRC((void)uma_->allocate<float>(0), errc::invalid_argument);
  EXPECT_EQ(uma_->stats().failures_of(errc::invalid_argument), 1u);
  EXPECT_EQ(backend_->counters().allocations, 0u);
}

TEST_F(allocator, CountTimesElementSizeOverflowIsRefusedBeforeAllocating) {
  UMA_EXPECT_ERRC((void)uma_->allocate<double>(SIZE_MAX / 4), errc::overflow);
  EXPECT_EQ(uma_->stats().failures_of(errc::overflow), 1u);
  EXPECT_EQ(backend_->counters().allocations, 0u);
}

TEST_F(allocator, AlignmentIsHonouredAndMustBeAPowerOfTwo) {
  auto ref = uma_->allocate<std::byte>(100, {.alignment = 1 << 16});
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(ref.data()) % (1 << 16), 0u);
  UMA_EXPECT_ERRC((void)uma_->allocate<std::byte>(100, {.alignment = 48}), errc::invalid_argument);
}

TEST_F(allocator, QuotaRefusesWhatWouldPassItAndNamesTheSizes) {
  auto c = make_client({.memory = {.quota_bytes = 1 << 20}});
  auto a = c->allocate<std::byte>(600 * 1024);
  UMA_EXPECT_ERROR((void)c->allocate<std::byte>(600 * 1024), errc::quota_exceeded,
                   "over the quota of 1048576 bytes");
  a.reset();
  (void)c->flush();
  auto b = c->allocate<std::byte>(600 * 1024);  // room again once the first is released
  EXPECT_TRUE(b.valid());
  EXPECT_EQ(c->stats().failures_of(errc::quota_exceeded), 1u);
}

TEST_F(allocator, LastDropReleasesTheRegionExactlyOnce) {
  auto ref = uma_->allocate<int>(256);
  {
    auto copy = ref;
    auto view = ref.subview(10, 20);
    ref.reset();
    EXPECT_EQ(uma_->flush().live_regions, 1u);  // views still hold it
  }
  const auto s = uma_->flush();
  EXPECT_EQ(s.releases, 1u);
  EXPECT_EQ(s.live_regions, 0u);
  EXPECT_EQ(s.live_bytes, 0u);
  EXPECT_EQ(backend_->counters().frees, 1u);
  EXPECT_EQ(backend_->counters().bad_frees, 0u);
}

TEST_F(allocator, ReleasesWithNoMessageAfterThemAreFreedByTheWakeUpOrTheReleaseTick) {
  // Nothing is sent to the allocator after each drop: the first wakes it, which starts the
  // release tick; the ones that follow while it ticks send nothing, and only the tick frees
  // them (docs/design.md, "Lifetime model").
  for (std::uint64_t i = 1; i <= 50; ++i) {
    auto ref = uma_->allocate<std::byte>(4096);
    ref.reset();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (backend_->counters().frees < i && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    ASSERT_EQ(backend_->counters().frees, i) << "release " << i << " was never freed";
  }
}

TEST_F(allocator, AdviceRoundTripsThroughAttributes) {
  auto ref = uma_->allocate<float>(4096);
  uma_->advise(ref, advice::set_read_mostly);
  uma_->advise(ref, advice::set_preferred_location, location::host_numa(0));
  auto a = uma_->attributes(ref);
  EXPECT_TRUE(a.read_mostly);
  EXPECT_EQ(a.preferred_location, location::host_numa(0));
  uma_->advise(ref, advice::unset_read_mostly);
  uma_->advise(ref, advice::unset_preferred_location);
  a = uma_->attributes(ref);
  EXPECT_FALSE(a.read_mostly);
  EXPECT_FALSE(a.preferred_location.has_value());
  EXPECT_EQ(uma_->stats().advises, 4u);
}

TEST_F(allocator, AccessedByTakesADeviceOnly) {
  auto ref = uma_->allocate<float>(16);
  UMA_EXPECT_ERRC(uma_->advise(ref, advice::set_accessed_by, location::host()),
                  errc::invalid_argument);
  UMA_EXPECT_ERRC(uma_->advise(ref, advice::set_accessed_by, location::device(1)),
                  errc::invalid_argument);  // past the one emulated device
  EXPECT_EQ(backend_->counters().advise_calls, 0u);
}

TEST_F(allocator, PrefetchRecordsTheLastPrefetchLocation) {
  auto ref = uma_->allocate<float>(1024);
  const auto res = uma_->prefetch(ref, location::host());
  EXPECT_EQ(res.ranges, 1u);
  EXPECT_EQ(res.bytes, 4096u);
  EXPECT_FALSE(res.completed);
  EXPECT_EQ(uma_->attributes(ref).last_prefetch_location, location::host());
  uma_->prefetch(ref, location::host_numa(0), {}, completion::complete);
  EXPECT_EQ(uma_->attributes(ref).last_prefetch_location, location::host_numa(0));
  const auto s = uma_->stats();
  EXPECT_EQ(s.prefetches, 2u);
  EXPECT_EQ(s.prefetch_bytes, 8192u);
}

TEST_F(allocator, PrefetchToAMissingDeviceNamesTheDevice) {
  auto ref = uma_->allocate<float>(16);
  UMA_EXPECT_ERROR(uma_->prefetch(ref, location::device(3)), errc::invalid_argument,
                   "prefetch to device 3 is not allowed");
  EXPECT_FALSE(uma_->attributes(ref).last_prefetch_location.has_value());
}

TEST_F(allocator, StreamsAreRejectedOnTheHostBackend) {
  auto ref = uma_->allocate<float>(16);
  int fake = 0;
  UMA_EXPECT_ERRC(uma_->prefetch(ref, location::host(), {&fake}), errc::invalid_argument);
  UMA_EXPECT_ERRC((void)uma_->allocate<float>(16, {.stream = {&fake}}), errc::invalid_argument);
}

TEST_F(allocator, DiscardAndDiscardPrefetchAreCounted) {
  auto ref = uma_->allocate<unsigned char>(8192);
  std::memset(ref.pin().data(), 1, 8192);
  uma_->discard({client::erase(ref)});
  EXPECT_EQ(ref.pin()[0], 0);
  uma_->discard_prefetch({client::erase(ref)}, {location::host()});
  EXPECT_EQ(uma_->attributes(ref).last_prefetch_location, location::host());
  const auto s = uma_->stats();
  EXPECT_EQ(s.discards, 2u);
  EXPECT_EQ(s.discard_bytes, 16384u);
  EXPECT_EQ(s.prefetches, 1u);
}

TEST_F(allocator, MemoryKindOfHostBackendPointers) {
  auto ref = uma_->allocate<float>(16);
  EXPECT_EQ(uma_->kind_of(ref.data()), memory_kind::host);
  EXPECT_EQ(uma_->kind_of(nullptr), memory_kind::unknown);
}

TEST_F(allocator, CanAccessFromHostAndTheEmulatedDeviceButNoOtherDevice) {
  auto ref = uma_->allocate<float>(16);
  EXPECT_TRUE(uma_->can_access(location::host(), ref));
  EXPECT_TRUE(uma_->can_access(location::device(0), ref));
  UMA_EXPECT_ERRC((void)uma_->can_access(location::device(1), ref), errc::invalid_argument);
  UMA_EXPECT_ERRC((void)uma_->can_access(location::host_numa(0), ref), errc::invalid_argument);
}

TEST_F(allocator, RefsOfAnotherAllocatorAreRefused) {
  auto other = make_client(host_config());
  auto foreign = other->allocate<float>(16);
  UMA_EXPECT_ERRC(uma_->prefetch(foreign, location::host()), errc::invalid_argument);
}

TEST_F(allocator, EmptyRefsAreRefused) {
  UMA_EXPECT_ERRC(uma_->prefetch(ManagedRef<float>{}, location::host()), errc::invalid_argument);
}

TEST_F(allocator, ErrorsTravelAsTheUmaCafCategory) {
  caf::scoped_actor self{sys_};
  caf::error err;
  self->request(uma_->handle(), caf::infinite, allocate_atom_v, allocate_request{0, 4})
      .receive([](byte_ref&) { FAIL() << "a zero-size allocation succeeded"; },
               [&](caf::error& e) { err = e; });
  EXPECT_EQ(err.category(), error_category);
  EXPECT_EQ(err.code(), static_cast<std::uint8_t>(errc::invalid_argument));
  EXPECT_NE(sys_.render(err).find("uma::invalid_argument"), std::string::npos) << sys_.render(err);
}

}  // namespace
}  // namespace uma
