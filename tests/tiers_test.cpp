// The tiers (issue 39, docs/design.md "Tiers"): the host tier (pinned host memory) and device
// memory for staging, owned by the allocator like its managed memory, and copies between them.
// On the host backend: both tiers are system memory, its device emulated, a copy a memmove; the
// ownership rules (quota, report, stats, budget, stop, inert refs, refusals) are what is tested.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include <uma/memory/copy.hpp>
#include <uma/memory/pin.hpp>
#include <uma/sys/fault_injecting_backend.hpp>

#include "support/actor_fixture.hpp"

namespace uma {
namespace {

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;

allocate_options host_tier() {
  return {.kind = memory_kind::pinned_host};
}
allocate_options device_tier(int device = 0) {
  return {.kind = memory_kind::cuda_device, .device = device};
}

class tiers : public test::actor_fixture {
 protected:
  tiers() {
    auto c = one_device_config(64 * MiB);
    backend_ = std::static_pointer_cast<host_backend>(c.backend.instance);
    uma_ = make_client(std::move(c));
  }

  /// Fills `ref` with bytes `first`, `first + 1`, ...
  static void fill(const byte_ref& ref, unsigned char first) {
    auto pin = ref.pin();
    std::iota(reinterpret_cast<unsigned char*>(pin.data()),
              reinterpret_cast<unsigned char*>(pin.data()) + pin.size(), first);
  }
  static std::vector<std::byte> bytes_of(const byte_ref& ref) {
    auto pin = ref.pin();
    return {pin.begin(), pin.end()};
  }
};

TEST_F(tiers, HostTierMemoryIsARegionOfTheReportCountedInStatsAndTheQuota) {
  const auto before = uma_->stats();
  auto host = uma_->allocate<std::byte>(3 * MiB, host_tier());
  const auto stats = uma_->stats();
  EXPECT_EQ(stats.host_tier_bytes, 3 * MiB);
  EXPECT_EQ(stats.device_tier_bytes, 0u);
  EXPECT_EQ(stats.live_bytes, before.live_bytes + 3 * MiB);  // under the same quota
  EXPECT_EQ(backend_->counters().tier_allocations, 1u);
  const auto report = uma_->regions();
  const auto row = std::find_if(report.begin(), report.end(),
                                [&](const region_info& r) { return r.id == host.id(); });
  ASSERT_NE(row, report.end());
  EXPECT_EQ(row->kind, memory_kind::pinned_host);
  EXPECT_EQ(row->bytes, 3 * MiB);
}

TEST_F(tiers, ALastDropFreesTierMemoryAsTierMemory) {
  {
    auto host = uma_->allocate<std::byte>(MiB, host_tier());
    auto device = uma_->allocate<std::byte>(MiB, device_tier());
  }
  (void)uma_->flush();
  EXPECT_EQ(uma_->stats().host_tier_bytes, 0u);
  EXPECT_EQ(uma_->stats().device_tier_bytes, 0u);
  const auto c = backend_->counters();
  EXPECT_EQ(c.tier_frees, 2u);
  EXPECT_EQ(c.frees, 0u);  // never handed to free_managed
  EXPECT_EQ(c.bad_frees, 0u);
}

TEST_F(tiers, TheQuotaRefusesTierMemoryPastItAndNothingIsAllocated) {
  (void)uma_->quota(2 * MiB);
  UMA_EXPECT_ERRC(uma_->allocate<std::byte>(3 * MiB, host_tier()), errc::quota_exceeded);
  EXPECT_EQ(backend_->counters().tier_allocations, 0u);
  EXPECT_EQ(uma_->stats().host_tier_bytes, 0u);
}

TEST_F(tiers, DeviceMemoryIsChargedWholeToItsDevicesBudgetAsHeld) {
  uma_->device_budget(0, 8 * MiB);
  auto staging = uma_->allocate<std::byte>(3 * MiB, device_tier());
  auto d = uma_->residency().devices.at(0);
  EXPECT_EQ(d.resident, 3 * MiB);
  EXPECT_EQ(d.held, 3 * MiB);
  EXPECT_EQ(uma_->residency().totals.to_device_bytes, 0u);  // nothing moved
  EXPECT_EQ(uma_->stats().device_tier_bytes, 3 * MiB);
  staging = {};
  (void)uma_->flush();
  d = uma_->residency().devices.at(0);
  EXPECT_EQ(d.resident, 0u);
  EXPECT_EQ(d.held, 0u);
  EXPECT_EQ(d.peak, 3 * MiB);
}

TEST_F(tiers, DeviceMemoryPastTheBudgetIsRefusedBeforeAnythingIsAllocated) {
  uma_->device_budget(0, 4 * MiB);
  auto first = uma_->allocate<std::byte>(3 * MiB, device_tier());
  UMA_EXPECT_ERROR(uma_->allocate<std::byte>(2 * MiB, device_tier()), errc::quota_exceeded,
                   "of device memory on device 0 do not fit its budget");
  EXPECT_EQ(backend_->counters().tier_allocations, 1u);
  EXPECT_EQ(uma_->residency().devices.at(0).resident, 3 * MiB);
}

TEST_F(tiers, DeviceMemoryEvictsUnheldManagedDataToMakeRoomAsAPlanWould) {
  uma_->device_budget(0, 8 * MiB);
  auto data = client::erase(uma_->allocate<std::byte>(6 * MiB));
  (void)uma_->will_access({data}, 0, access_mode::write, residency_policy::migrate);
  (void)uma_->done_with({data});
  auto staging = uma_->allocate<std::byte>(4 * MiB, device_tier());
  (void)uma_->flush();
  const auto report = uma_->residency();
  EXPECT_EQ(report.devices.at(0).resident, 4 * MiB);
  EXPECT_EQ(report.totals.to_host_bytes, 6 * MiB);
  EXPECT_EQ(report.totals.evictions, 1u);
}

TEST_F(tiers, DeviceMemoryNeedsADeviceTheBackendHas) {
  UMA_EXPECT_ERRC(uma_->allocate<std::byte>(MiB, device_tier(3)), errc::invalid_argument);
  UMA_EXPECT_ERRC(uma_->allocate<std::byte>(MiB, device_tier(-1)), errc::invalid_argument);
  EXPECT_EQ(backend_->counters().tier_allocations, 0u);
}

TEST_F(tiers, OnlyManagedMemoryAndTheTwoTiersAreAllocated) {
  UMA_EXPECT_ERRC(uma_->allocate<std::byte>(MiB, {.kind = memory_kind::cuda_mempool}),
                  errc::invalid_argument);
  UMA_EXPECT_ERRC(uma_->allocate<std::byte>(MiB, {.kind = memory_kind::host}),
                  errc::invalid_argument);
  EXPECT_EQ(backend_->counters().tier_allocations, 0u);
  EXPECT_EQ(backend_->counters().allocations, 0u);
}

TEST_F(tiers, TierMemoryNeverMigratesTakesNoAdviceAndIsInNoPlan) {
  auto host = client::erase(uma_->allocate<std::byte>(MiB, host_tier()));
  auto device = client::erase(uma_->allocate<std::byte>(MiB, device_tier()));
  for (const auto& ref : {host, device}) {
    UMA_EXPECT_ERROR(uma_->prefetch({ref}, {location::device(0)}), errc::invalid_argument,
                     "a tier");
    UMA_EXPECT_ERRC(uma_->advise({ref}, advice::set_read_mostly), errc::invalid_argument);
    UMA_EXPECT_ERRC(uma_->will_access({ref}, 0, access_mode::read, residency_policy::migrate),
                    errc::invalid_argument);
    const auto range = ref.range();
    access_plan_request by_address;
    by_address.ranges = {{reinterpret_cast<std::uintptr_t>(range.ptr), range.bytes}};
    UMA_EXPECT_ERRC(uma_->will_access(by_address), errc::invalid_argument);
  }
  EXPECT_EQ(backend_->counters().prefetch_calls, 0u);
  EXPECT_EQ(backend_->counters().advise_calls, 0u);
}

TEST_F(tiers, CopiesMoveTheBytesExactlyAndTheLedgerCountsEachDirection) {
  auto host = client::erase(uma_->allocate<std::byte>(MiB, host_tier()));
  auto device = client::erase(uma_->allocate<std::byte>(MiB, device_tier()));
  auto managed = client::erase(uma_->allocate<std::byte>(MiB));
  fill(host, 7);
  copy(device, host);     // host tier -> device side
  copy(managed, device);  // within the device side
  copy(host.subview(0, 64 * KiB), managed.subview(MiB - 64 * KiB, 64 * KiB));  // back
  EXPECT_EQ(bytes_of(managed), bytes_of(device));
  auto expected = bytes_of(device);
  std::copy(expected.end() - 64 * KiB, expected.end(), expected.begin());
  EXPECT_EQ(bytes_of(host), expected);
  const auto s = uma_->stats();
  EXPECT_EQ(s.copy_to_device_bytes, MiB);
  EXPECT_EQ(s.copy_to_host_bytes, 64 * KiB);
  EXPECT_EQ(s.copy_other_bytes, MiB);
  EXPECT_EQ(s.copies, 3u);
  const auto copies = uma_->residency().copies;
  EXPECT_EQ(copies.to_device_bytes, MiB);
  EXPECT_EQ(copies.to_host_bytes, 64 * KiB);
}

TEST_F(tiers, ACopyOfOtherSizesOrOverlappingBytesIsRefusedAndCopiesNothing) {
  auto host = client::erase(uma_->allocate<std::byte>(MiB, host_tier()));
  auto device = client::erase(uma_->allocate<std::byte>(MiB, device_tier()));
  fill(host, 1);
  fill(device, 9);
  const auto before = bytes_of(device);
  UMA_EXPECT_ERROR(copy(device, host.subview(0, KiB)), errc::invalid_argument, "same size");
  UMA_EXPECT_ERROR(copy(host.subview(0, 64 * KiB), host.subview(32 * KiB, 64 * KiB)),
                   errc::invalid_argument, "overlap");
  UMA_EXPECT_ERRC(copy(device, byte_ref{}), errc::invalid_argument);
  EXPECT_EQ(bytes_of(device), before);
  EXPECT_EQ(uma_->stats().copies, 0u);
  EXPECT_EQ(backend_->counters().copies, 0u);
}

TEST_F(tiers, ACopyBetweenTwoAllocatorsIsRefused) {
  auto other = make_client(one_device_config());
  auto mine = client::erase(uma_->allocate<std::byte>(MiB, host_tier()));
  auto theirs = client::erase(other->allocate<std::byte>(MiB, host_tier()));
  UMA_EXPECT_ERROR(copy(mine, theirs), errc::invalid_argument, "different allocators");
}

TEST_F(tiers, AStopFreesTierMemoryAndItsRefsGoInert) {
  auto host = client::erase(uma_->allocate<std::byte>(2 * MiB, host_tier()));
  auto device = client::erase(uma_->allocate<std::byte>(MiB, device_tier()));
  const auto report = uma_->stop();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->stop.regions_freed, 2u);
  EXPECT_EQ(report->stop.bytes_freed, 3 * MiB);
  EXPECT_EQ(report->stats.host_tier_bytes, 0u);
  EXPECT_EQ(report->stats.device_tier_bytes, 0u);
  EXPECT_EQ(backend_->counters().tier_frees, 2u);
  EXPECT_FALSE(host.valid());
  EXPECT_FALSE(device.valid());
  UMA_EXPECT_ERRC(copy(device, host), errc::allocator_stopped);
  EXPECT_EQ(backend_->counters().copies, 0u);
}

TEST_F(tiers, AFailedCopyIsReportedAndCountsNothing) {
  auto faults = std::make_shared<fault_injecting_backend>(std::make_shared<host_backend>());
  auto c = one_device_config();
  c.backend.instance = faults;
  auto faulty = make_client(std::move(c));
  auto host = client::erase(faulty->allocate<std::byte>(MiB, host_tier()));
  auto device = client::erase(faulty->allocate<std::byte>(MiB, device_tier()));
  faults->inject({.op = backend_op::copy, .nth = 1, .code = errc::backend_error});
  UMA_EXPECT_ERRC(copy(device, host), errc::backend_error);
  EXPECT_EQ(faulty->stats().copies, 0u);
  copy(device, host);  // the next one goes through
  EXPECT_EQ(faulty->stats().copies, 1u);
}

}  // namespace
}  // namespace uma
