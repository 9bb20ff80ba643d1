// Plans by range through the allocator (issue 25, docs/residency.md "Ranges"), on the host
// backend's emulated device: the account charges exactly the pages a plan covers, evicts extents
// least recently used first, discards dead ranges, refuses what a tenant's budget cannot hold and
// ranges in no live region (nothing changes), and forgets a freed region's extents.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include <uma/sys/detail/format.hpp>

#include "support/actor_fixture.hpp"

namespace uma {
namespace {

constexpr std::size_t page = 4096;
constexpr std::size_t MiB = std::size_t{1} << 20;

class range_plans : public test::actor_fixture {
 protected:
  range_plans() {
    uma_ = make_client(one_device_config());
    region_ = client::erase(uma_->allocate<std::byte>(64 * page));
  }

  /// Bytes [offset, offset + bytes) of the test's region.
  [[nodiscard]] address_range at(std::size_t offset, std::size_t bytes) const {
    return {reinterpret_cast<std::uintptr_t>(region_.range().ptr) + offset, bytes};
  }
  residency_result plan(std::vector<address_range> ranges, std::string tenant = {}) {
    access_plan_request r;
    r.policy = residency_policy::migrate;
    r.ranges = std::move(ranges);
    r.tenant = std::move(tenant);
    return uma_->will_access(std::move(r));
  }
  std::size_t resident() { return uma_->residency().devices.at(0).resident; }

  byte_ref region_;
};

TEST_F(range_plans, APlanChargesThePagesItsRangeTouchesAndNoMore) {
  const auto r = plan({at(100, page)});  // bytes 100 .. 4196: pages 0 and 1
  EXPECT_EQ(r.to_device_bytes, 2 * page);
  EXPECT_EQ(resident(), 2 * page);
  EXPECT_EQ(uma_->residency().unplanned_bytes, 62 * page);  // the rest of the region
}

TEST_F(range_plans, APageTwoPlansShareIsChargedOnceAndHeldByBoth) {
  (void)plan({at(0, page + 1)});                       // pages 0, 1
  const auto second = plan({at(page + 2, 2 * page)});  // pages 1, 2, 3: page 1 is there
  EXPECT_EQ(second.to_device_bytes, 2 * page);
  EXPECT_EQ(resident(), 4 * page);
  EXPECT_EQ(uma_->residency().devices[0].held, 4 * page);
  EXPECT_EQ(uma_->done_with(std::vector{at(0, page + 1)}), 2u);  // pages 0 and 1
  EXPECT_EQ(uma_->residency().devices[0].held, 3 * page);        // page 1 is still the second's
  UMA_EXPECT_ERROR((void)uma_->dead(std::vector{at(page, page)}), errc::invalid_argument,
                   "bytes [4096, +4096) of region");  // the extent named by its bytes
  UMA_EXPECT_ERROR((void)uma_->dead(std::vector{at(page, page)}), errc::invalid_argument,
                   "held by 1 plan");
}

TEST_F(range_plans, ExtentsAreEvictedLeastRecentlyUsedFirst) {
  uma_->device_budget(0, 4 * page);
  (void)plan({at(0, 2 * page)});
  uma_->done_with(std::vector{at(0, 2 * page)});
  (void)plan({at(8 * page, 2 * page)});
  uma_->done_with(std::vector{at(8 * page, 2 * page)});
  auto r = plan({at(16 * page, 2 * page)});  // the first range is the oldest: it goes
  EXPECT_EQ(r.to_host_bytes, 2 * page);
  EXPECT_EQ(r.evictions, 1u);
  uma_->done_with(std::vector{at(16 * page, 2 * page)});
  r = plan({at(page, page)});  // page 1 of the first range: the second range goes now
  EXPECT_EQ(r.to_host_bytes, 2 * page);
  EXPECT_EQ(r.to_device_bytes, page);
  EXPECT_EQ(resident(), 3 * page);
}

TEST_F(range_plans, ADeadRangeDiscardsItsPagesAndKeepsTheRest) {
  (void)plan({at(0, 4 * page)});
  uma_->done_with(std::vector{at(0, 4 * page)});
  const auto d = uma_->dead(std::vector{at(page, 2 * page)});
  EXPECT_EQ(d.discarded_bytes, 2 * page);
  EXPECT_EQ(resident(), 2 * page);
  UMA_EXPECT_ERROR((void)uma_->dead(std::vector{at(8 * page, page)}), errc::invalid_argument,
                   "is in no plan");
}

TEST_F(range_plans, APlanPastItsTenantsBudgetIsRefusedAndChangesNothing) {
  uma_->tenant_budget("t", 0, 2 * page);
  (void)plan({at(0, page)}, "t");
  const auto before = uma_->residency();
  UMA_EXPECT_ERROR((void)plan({at(4 * page, 2 * page)}, "t"), errc::quota_exceeded, "tenant 't'");
  const auto after = uma_->residency();
  EXPECT_EQ(after.devices[0].resident, before.devices[0].resident);
  EXPECT_EQ(after.totals, before.totals);
  EXPECT_EQ(after.unplanned_bytes, before.unplanned_bytes);  // its new extent left again
}

TEST_F(range_plans, ARangeInNoLiveRegionIsRefusedNamingItsAddressAndNothingChanges) {
  (void)plan({at(0, page)});
  const auto before = uma_->residency();
  int local = 0;
  const address_range stray{reinterpret_cast<std::uintptr_t>(&local), sizeof local};
  UMA_EXPECT_ERROR((void)plan({at(page, page), stray}), errc::invalid_argument,
                   detail::hex(&local));
  UMA_EXPECT_ERROR((void)plan({at(63 * page, 2 * page)}), errc::invalid_argument,
                   "not inside a live region");
  UMA_EXPECT_ERROR((void)uma_->done_with(std::vector{stray}), errc::invalid_argument, "done_with");
  const auto after = uma_->residency();
  EXPECT_EQ(after.devices[0].resident, before.devices[0].resident);
  EXPECT_EQ(after.devices[0].held, before.devices[0].held);
  EXPECT_EQ(after.unplanned_bytes, before.unplanned_bytes);
}

TEST_F(range_plans, AFreedRegionsExtentsLeaveTheAccount) {
  (void)plan({at(0, page), at(10 * page, 3 * page)});
  uma_->done_with(std::vector{at(0, page), at(10 * page, 3 * page)});
  EXPECT_EQ(resident(), 4 * page);
  region_ = {};  // the last ref: the allocator frees the region, the account forgets its extents
  const auto r = uma_->residency();
  EXPECT_EQ(r.devices[0].resident, 0u);
  EXPECT_EQ(r.unplanned_bytes, 0u);
  EXPECT_EQ(r.totals.to_device_bytes, 4 * page);  // the ledger keeps what moved
}

TEST_F(range_plans, ARefPlansItsOwnBytesAndARangeOfItSharesItsExtents) {
  auto ref = region_.subview(2 * page, 2 * page);
  const auto r = uma_->will_access({ref}, 0, access_mode::read, residency_policy::migrate);
  EXPECT_EQ(r.to_device_bytes, 2 * page);
  EXPECT_EQ(uma_->done_with(std::vector{at(2 * page, 2 * page)}), 1u);  // the ref's extent
  EXPECT_EQ(uma_->residency().devices[0].held, 0u);
}

}  // namespace
}  // namespace uma
