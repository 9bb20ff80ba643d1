// The extents of pages plans cover (memory/planned_extents.hpp) and the account's split
// (memory/residency_account.hpp): every page in one extent, ranges rounded outward to pages,
// overlaps split at their ends, a refused range changing nothing.

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include <uma/memory/planned_extents.hpp>
#include <uma/memory/residency_account.hpp>
#include <uma/sys/error.hpp>

#include "support/actor_fixture.hpp"

namespace uma {
namespace {

constexpr std::size_t page = planned_extents::page_bytes;
constexpr std::size_t region_bytes = 16 * page;

std::vector<std::size_t> offsets(const std::vector<planned_extents::extent>& es) {
  std::vector<std::size_t> out;
  for (const auto& e : es)
    out.push_back(e.offset);
  return out;
}

TEST(planned_extents, ARangeIsRoundedOutwardToWholePages) {
  planned_extents x;
  const auto c = x.cover_range(7, region_bytes, 100, page);  // bytes 100 .. 4196: pages 0 and 1
  ASSERT_EQ(c.extents.size(), 1u);
  EXPECT_EQ(c.extents[0].offset, 0u);
  EXPECT_EQ(c.extents[0].bytes, 2 * page);
  EXPECT_EQ(c.created.size(), 1u);
  EXPECT_TRUE(c.splits.empty());
  EXPECT_EQ(x.covered(7), 2 * page);
}

TEST(planned_extents, TheLastPageOfARegionCountsOnlyTheRegionsBytes) {
  planned_extents x;
  const auto c = x.cover_range(1, 2 * page + 10, page, page + 10);
  ASSERT_EQ(c.extents.size(), 1u);
  EXPECT_EQ(c.extents[0].bytes, page + 10);
}

TEST(planned_extents, AnOverlappingRangeSplitsTheExtentsAtItsEndsSoEachPageIsInOne) {
  planned_extents x;
  const auto a = x.cover_range(1, region_bytes, 0, 3 * page);         // pages 0-2
  const auto b = x.cover_range(1, region_bytes, 2 * page, 3 * page);  // pages 2-4
  ASSERT_EQ(b.splits.size(), 1u);
  EXPECT_EQ(b.splits[0].from, a.extents[0].id);
  EXPECT_EQ(b.splits[0].bytes, page);  // page 2 left the first extent
  EXPECT_EQ(offsets(b.extents), (std::vector<std::size_t>{2 * page, 3 * page}));
  EXPECT_EQ(b.extents[0].id, b.splits[0].to);
  EXPECT_EQ(offsets(x.of(1)), (std::vector<std::size_t>{0, 2 * page, 3 * page}));
  EXPECT_EQ(x.covered(1), 5 * page);  // five pages, each once
  EXPECT_EQ(x.find(a.extents[0].id)->bytes, 2 * page);
}

TEST(planned_extents, ARangeInsideOneExtentSplitsItInThree) {
  planned_extents x;
  (void)x.cover_range(1, region_bytes, 0, 8 * page);
  const auto c = x.cover_range(1, region_bytes, 3 * page, 2 * page);
  EXPECT_EQ(c.splits.size(), 2u);
  EXPECT_TRUE(c.created.empty());
  ASSERT_EQ(c.extents.size(), 1u);
  EXPECT_EQ(c.extents[0].offset, 3 * page);
  EXPECT_EQ(c.extents[0].bytes, 2 * page);
  EXPECT_EQ(offsets(x.of(1)), (std::vector<std::size_t>{0, 3 * page, 5 * page}));
}

TEST(planned_extents, APlannedRangeWithAPageNoPlanCoversIsRefusedAndNothingChanges) {
  planned_extents x;
  (void)x.cover_range(1, region_bytes, 0, 2 * page);
  UMA_EXPECT_ERROR((void)x.planned_range(1, region_bytes, page, 2 * page, "done_with"),
                   errc::invalid_argument, "page 2 (bytes from 8192) of region 1 is in no plan");
  EXPECT_EQ(x.size(), 1u);  // not split at page 1
  UMA_EXPECT_ERROR((void)x.planned_range(2, region_bytes, 0, page, "dead"), errc::invalid_argument,
                   "dead: page 0");
  const auto c = x.planned_range(1, region_bytes, page, page, "done_with");
  EXPECT_EQ(c.splits.size(), 1u);
  EXPECT_EQ(c.extents.size(), 1u);
}

TEST(planned_extents, RangesPastTheRegionOrOfNoBytesAreRefused) {
  planned_extents x;
  UMA_EXPECT_ERROR((void)x.cover_range(1, region_bytes, region_bytes - 1, 2),
                   errc::invalid_argument, "pass the region's end");
  UMA_EXPECT_ERROR((void)x.cover_range(1, region_bytes, 0, 0), errc::invalid_argument, "0 bytes");
  EXPECT_EQ(x.size(), 0u);
}

TEST(planned_extents, ErasedAndForgottenExtentsLeave) {
  planned_extents x;
  const auto a = x.cover_range(1, region_bytes, 0, page);
  const auto b = x.cover_range(1, region_bytes, 4 * page, page);
  x.erase(b.created);
  EXPECT_EQ(x.covered(1), page);
  std::vector<std::uint64_t> gone;
  x.forget(1, [&](std::uint64_t id) { gone.push_back(id); });
  EXPECT_EQ(gone, std::vector<std::uint64_t>{a.extents[0].id});
  EXPECT_EQ(x.size(), 0u);
  EXPECT_FALSE(x.find(a.extents[0].id).has_value());
}

TEST(residency_account_split, APartCopiesTheStateAndTheSumsStayWhatTheyWere) {
  residency_account account({64 * page});
  account.set_budget(0, 8 * page);
  const planned_region r{1, 4 * page, residency_policy::migrate};
  (void)account.will_access({&r, 1}, 0, access_mode::write);
  const auto before = account.device(0);
  account.split(1, 2, page);
  EXPECT_EQ(account.device(0).resident, before.resident);
  EXPECT_EQ(account.device(0).held, before.held);
  EXPECT_EQ(account.resident_on(2), 0);
  EXPECT_EQ(account.effective_policy(2), residency_policy::migrate);
  EXPECT_EQ(account.ledger(2)->to_device_bytes, 0u);  // the ledger stayed with region 1
  EXPECT_EQ(account.ledger(1)->to_device_bytes, 4 * page);
  const std::uint64_t both[] = {1, 2};
  account.done_with(both);  // the hold was copied: one each
  EXPECT_EQ(account.device(0).held, 0u);
  const auto dead = account.dead(both);  // written: each part's bytes dropped
  EXPECT_EQ(dead.evictions.size(), 2u);
  EXPECT_EQ(account.totals().discarded_bytes, 4 * page);
  UMA_EXPECT_ERROR(account.split(1, 3, 3 * page), errc::invalid_argument, "cannot give");
  UMA_EXPECT_ERROR(account.split(1, 2, page), errc::invalid_argument, "in the account already");
  UMA_EXPECT_ERROR(account.split(9, 3, page), errc::invalid_argument, "in no plan");
}

}  // namespace
}  // namespace uma
