#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <unistd.h>

#include <uma/sys/error.hpp>
#include <uma/sys/host_backend.hpp>
#include "support/actor_fixture.hpp"

namespace uma {
namespace {

TEST(HostBackend, EmulatesOneDeviceByDefaultAndAlignsToThePageSize) {
  host_backend b;
  EXPECT_EQ(b.kind(), backend_kind::host);
  ASSERT_EQ(b.device_count(), 1);
  const auto& caps = b.capabilities(0);
  EXPECT_EQ(caps.ordinal, 0);
  EXPECT_EQ(caps.name, "emulated device 0");
  EXPECT_EQ(caps.total_memory, b.default_quota());
  EXPECT_EQ(caps.compute_major, 0);  // it runs no kernels
  EXPECT_TRUE(caps.managed_memory);
  EXPECT_TRUE(caps.concurrent_managed_access);  // it is all system memory
  EXPECT_FALSE(caps.memory_pools);
  EXPECT_NE(b.description().find("1 emulated device(s)"), std::string::npos) << b.description();
  UMA_EXPECT_ERRC((void)b.capabilities(1), errc::invalid_argument);
  EXPECT_EQ(b.guaranteed_alignment(), static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
}

TEST(HostBackend, EmulatesTheDevicesItIsGiven) {
  host_backend b(emulated_devices{3, std::uint64_t{64} << 20});
  ASSERT_EQ(b.device_count(), 3);
  EXPECT_EQ(b.capabilities(2).name, "emulated device 2");
  EXPECT_EQ(b.capabilities(2).total_memory, std::size_t{64} << 20);
  EXPECT_EQ(host_backend(emulated_devices{0, 0}).device_count(), 0);
  UMA_EXPECT_ERRC(host_backend(emulated_devices{-1, 0}), errc::invalid_argument);
  UMA_EXPECT_ERRC(host_backend(emulated_devices{emulated_devices::max_count + 1, 0}),
                  errc::invalid_argument);
  EXPECT_EQ(make_backend(backend_choice::host, {2, 4096})->device_count(), 2);
}

/// Two pages of `b`'s managed memory, every byte 7.
unsigned char* two_pages_of_sevens(host_backend& b) {
  const std::size_t page = b.guaranteed_alignment();
  auto* p = static_cast<unsigned char*>(b.allocate_managed(2 * page, attach_flag::global));
  std::memset(p, 7, 2 * page);
  return p;
}

TEST(HostBackend, RecordsPrefetchAndAdviceToAnEmulatedDeviceWithoutCopying) {
  host_backend b;
  const std::size_t page = b.guaranteed_alignment();
  auto* p = two_pages_of_sevens(b);
  const byte_range r{p, 2 * page};
  const location gpu[] = {location::device(0)};
  b.prefetch({&r, 1}, gpu, {});
  b.advise(r, advice::set_preferred_location, location::device(0));
  b.advise(r, advice::set_accessed_by, location::device(0));
  const auto a = b.attributes(r);
  EXPECT_EQ(a.last_prefetch_location, location::device(0));
  EXPECT_EQ(a.preferred_location, location::device(0));
  EXPECT_EQ(a.accessed_by, std::vector{location::device(0)});
  EXPECT_EQ(p[0], 7);  // the data stayed where it was: in system memory, readable
  EXPECT_EQ(b.counters().prefetch_calls, 1u);
  EXPECT_EQ(b.counters().advise_calls, 2u);
  b.free_managed(p, 2 * page);
}

TEST(HostBackend, FreeingTwiceIsCountedAsBadAndChangesNothing) {
  host_backend b;
  void* p = b.allocate_managed(4096, attach_flag::global);
  b.free_managed(p, 4096);
  b.free_managed(p, 4096);
  EXPECT_EQ(b.counters().frees, 1u);
  EXPECT_EQ(b.counters().bad_frees, 1u);
}

TEST(HostBackend, AttributesAnswerExactlyWhatWasSet) {
  host_backend b;
  const std::size_t page = b.guaranteed_alignment();
  auto* p = static_cast<std::byte*>(b.allocate_managed(4 * page, attach_flag::global));
  const byte_range all{p, 4 * page};
  EXPECT_EQ(b.attributes(all), range_attributes{});

  b.advise(all, advice::set_read_mostly, location::host());
  b.advise(all, advice::set_preferred_location, location::host_numa(0));
  const location here[] = {location::host()};
  b.prefetch({&all, 1}, here, {});
  auto a = b.attributes(all);
  EXPECT_TRUE(a.read_mostly);
  EXPECT_EQ(a.preferred_location, location::host_numa(0));
  EXPECT_EQ(a.last_prefetch_location, location::host());

  // Per-page state: a range whose pages disagree reports "no common value", like CUDA.
  const byte_range first_page{p, page};
  b.advise(first_page, advice::unset_read_mostly, location::host());
  b.advise(first_page, advice::unset_preferred_location, location::host());
  a = b.attributes(all);
  EXPECT_FALSE(a.read_mostly);
  EXPECT_FALSE(a.preferred_location.has_value());
  EXPECT_TRUE(b.attributes({p + page, 3 * page}).read_mostly);
  b.free_managed(p, 4 * page);
}

TEST(HostBackend, RejectsDevicesPastTheEmulatedOnesStreamsAndMissingNumaNodes) {
  host_backend b;
  void* p = b.allocate_managed(4096, attach_flag::global);
  const byte_range r{p, 4096};
  const location gpu[] = {location::device(1)};
  UMA_EXPECT_ERRC(b.prefetch({&r, 1}, gpu, {}), errc::invalid_argument);
  host_backend none(emulated_devices{0, 0});
  void* q = none.allocate_managed(4096, attach_flag::global);
  const byte_range rq{q, 4096};
  const location first[] = {location::device(0)};
  UMA_EXPECT_ERRC(none.prefetch({&rq, 1}, first, {}), errc::invalid_argument);
  UMA_EXPECT_ERRC(none.advise(rq, advice::set_accessed_by, location::device(0)),
                  errc::invalid_argument);
  none.free_managed(q, 4096);
  const location far[] = {location::host_numa(b.host_numa_nodes())};
  UMA_EXPECT_ERRC(b.prefetch({&r, 1}, far, {}), errc::invalid_argument);
  int fake_stream = 0;
  UMA_EXPECT_ERRC((void)b.is_capturing({&fake_stream}), errc::invalid_argument);
  EXPECT_EQ(b.attributes(r), range_attributes{});  // nothing recorded by the rejected calls
  b.free_managed(p, 4096);
}

TEST(HostBackend, RangesOutsideAllocationsAreRejected) {
  host_backend b;
  auto* p = static_cast<std::byte*>(b.allocate_managed(4096, attach_flag::global));
  UMA_EXPECT_ERRC((void)b.attributes({p + 4000, 200}), errc::invalid_argument);
  int local = 0;
  UMA_EXPECT_ERRC((void)b.attributes({&local, sizeof local}), errc::invalid_argument);
  b.free_managed(p, 4096);
}

TEST(HostBackend, DiscardDropsWholePages) {
  host_backend b;
  const std::size_t page = b.guaranteed_alignment();
  auto* p = two_pages_of_sevens(b);
  const byte_range r{p, 2 * page};
  b.discard({&r, 1}, {});
  EXPECT_EQ(p[0], 0);  // anonymous pages come back zeroed after MADV_DONTNEED
  EXPECT_EQ(p[2 * page - 1], 0);
  EXPECT_EQ(b.counters().discard_calls, 1u);
  b.free_managed(p, 2 * page);
}

// README.md "Using it", on the default host backend (no backend given, no device configured): a
// program written for CUDA runs unchanged, and what it asked for is what it reads back.
class readme_on_the_host : public test::actor_fixture {};

TEST_F(readme_on_the_host, PrefetchAdviceAndAttributesToDeviceZeroWork) {
  client uma(sys_, allocator_config{.backend = {.choice = backend_choice::host}});
  auto weights = uma.allocate<float>(1 << 20);
  {
    auto pin = weights.pin();
    std::fill(pin.begin(), pin.end(), 1.0f);
  }
  uma.prefetch(weights, location::device(0));
  uma.advise(weights, advice::set_read_mostly);
  uma.advise(weights, advice::set_preferred_location, location::device(0));
  uma.advise(weights, advice::set_accessed_by, location::device(0));
  const auto attrs = uma.attributes(weights);
  EXPECT_EQ(attrs.last_prefetch_location, location::device(0));
  EXPECT_TRUE(attrs.read_mostly);
  EXPECT_EQ(attrs.preferred_location, location::device(0));
  EXPECT_EQ(attrs.accessed_by, std::vector{location::device(0)});
  EXPECT_TRUE(uma.can_access(location::device(0), weights));
  EXPECT_EQ(weights.pin()[12345], 1.0f);  // nothing copied, nothing lost
  uma.discard({client::erase(weights)}, {}, completion::complete);
  const auto s = uma.stats();
  EXPECT_EQ(s.backend, "host");
  EXPECT_EQ(s.prefetches, 1u);
  UMA_EXPECT_ERRC(uma.prefetch(weights, location::device(1)), errc::invalid_argument);
}

TEST_F(readme_on_the_host, BlocksBudgetsAndPlansUseTheEmulatedDevice) {
  client fast(sys_, allocator_config{.backend = {.choice = backend_choice::host},
                                     .memory = {.policy = allocation_policy::pool}});
  auto frame = fast.blocks()->allocate_n<float>(16 * 1024, 0, {});
  fast.prefetch(frame, location::device(0));
  EXPECT_EQ(fast.attributes(frame).last_prefetch_location, location::device(0));

  auto region = client::erase(fast.allocate<std::byte>(std::size_t{1} << 20, {.label = "w"}));
  EXPECT_EQ(fast.device_budget(0, std::size_t{4} << 20), std::size_t{4} << 20);
  EXPECT_EQ(fast.will_access({region}, 0, access_mode::read).to_device_bytes, std::size_t{1} << 20);
  // The plan's move was made on the emulated device: recorded, counted, no data copied.
  EXPECT_EQ(fast.attributes(region).last_prefetch_location, location::device(0));
  EXPECT_EQ(fast.residency().devices.at(0).resident, std::size_t{1} << 20);
}

TEST(BackendSelection, ParsesChoicesAndAutoFallsBackToHost) {
  EXPECT_EQ(parse_backend_choice("auto"), backend_choice::automatic);
  EXPECT_EQ(parse_backend_choice("cuda"), backend_choice::cuda);
  EXPECT_EQ(parse_backend_choice("host"), backend_choice::host);
  EXPECT_FALSE(parse_backend_choice("gpu").has_value());
  auto b = make_backend(backend_choice::automatic);
  ASSERT_NE(b, nullptr);
  if (b->kind() == backend_kind::host) {
    // No usable CUDA device here: asking for CUDA explicitly must say why, not crash.
    UMA_EXPECT_ERRC((void)make_backend(backend_choice::cuda), errc::no_device);
  }
}

}  // namespace
}  // namespace uma
