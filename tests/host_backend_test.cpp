#include <gtest/gtest.h>

#include <cstring>

#include <unistd.h>

#include <uma/sys/error.hpp>
#include <uma/sys/host_backend.hpp>
#include "support/actor_fixture.hpp"

namespace uma {
namespace {

TEST(HostBackend, HasNoDevicesAndAlignsToThePageSize) {
  host_backend b;
  EXPECT_EQ(b.device_count(), 0);
  EXPECT_EQ(b.guaranteed_alignment(), static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
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

TEST(HostBackend, RejectsDevicesStreamsAndMissingNumaNodes) {
  host_backend b;
  void* p = b.allocate_managed(4096, attach_flag::global);
  const byte_range r{p, 4096};
  const location gpu[] = {location::device(0)};
  UMA_EXPECT_ERRC(b.prefetch({&r, 1}, gpu, {}), errc::invalid_argument);
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
  auto* p = static_cast<unsigned char*>(b.allocate_managed(2 * page, attach_flag::global));
  std::memset(p, 7, 2 * page);
  const byte_range r{p, 2 * page};
  b.discard({&r, 1}, {});
  EXPECT_EQ(p[0], 0);  // anonymous pages come back zeroed after MADV_DONTNEED
  EXPECT_EQ(p[2 * page - 1], 0);
  EXPECT_EQ(b.counters().discard_calls, 1u);
  b.free_managed(p, 2 * page);
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
