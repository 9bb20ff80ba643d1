// The remote gateway's lease book (actors/remote/detail/lease_book.hpp) on its own: a session's
// leased regions, their bytes and charges, and their release. The gateway's own tests
// (remote_gateway_test.cpp) drive it through sessions; these name each rule directly, with
// regions of a host-backend allocator.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <vector>

#include <uma/actors/remote/detail/lease_book.hpp>
#include <uma/actors/remote/detail/lease_totals.hpp>

#include "support/actor_fixture.hpp"

namespace uma {
namespace {

using detail::lease_book;
using detail::lease_totals;

class lease_book_test : public test::actor_fixture {
 protected:
  byte_ref region(std::size_t bytes) { return uma_->allocate<std::byte>(bytes); }

  /// A second allocator standing for the incarnation a restart starts (generation 2).
  client& next_incarnation() {
    if (!next_) {
      auto c = host_config();
      c.supervision.generation = 2;
      next_ = make_client(std::move(c));
    }
    return *next_;
  }

  std::unique_ptr<client> next_;
};

TEST_F(lease_book_test, AddedLeasesCountTheirBytesAndCharges) {
  lease_book book;
  const auto a = book.add(region(4096), 4096 + 5);
  const auto b = book.add(region(8192), 8192);
  EXPECT_NE(a, b);
  EXPECT_EQ(book.size(), 2u);
  EXPECT_EQ(book.held_bytes(), 4096u + 8192u);
  EXPECT_EQ(book.charged(), 4096u + 5u + 8192u);
}

TEST_F(lease_book_test, PendingChargesCountUntilSettled) {
  lease_book book;
  book.reserve(1000);
  EXPECT_EQ(book.charged(), 1000u);
  EXPECT_EQ(book.held_bytes(), 0u);
  book.settle(1000);
  EXPECT_EQ(book.charged(), 0u);
}

TEST_F(lease_book_test, ReleaseDropsTheRefSoTheAllocatorFreesTheRegion) {
  lease_book book;
  const auto h = book.add(region(4096), 4096);
  EXPECT_EQ(uma_->flush().live_regions, 1u);
  EXPECT_EQ(book.release(h), std::optional<std::uint64_t>{4096});
  EXPECT_EQ(book.size(), 0u);
  EXPECT_EQ(uma_->flush().live_regions, 0u);
}

TEST_F(lease_book_test, ReleasingAHandleNotLeasedChangesNothing) {
  lease_book book;
  const auto h = book.add(region(4096), 4096);
  EXPECT_FALSE(book.release({h.id + 1000, h.generation}).has_value());
  EXPECT_FALSE(book.release({h.id, h.generation + 1}).has_value());
  EXPECT_EQ(book.size(), 1u);
  EXPECT_EQ(uma_->flush().live_regions, 1u);
}

TEST_F(lease_book_test, ReleaseAllEndsEveryLeaseAndReportsWhatItHeld) {
  lease_book book;
  (void)book.add(region(4096), 4096);
  (void)book.add(region(12288), 12288);
  const auto gone = book.release_all();
  EXPECT_EQ(gone.leases, 2u);
  EXPECT_EQ(gone.bytes, 4096u + 12288u);
  EXPECT_EQ(book.size(), 0u);
  EXPECT_EQ(uma_->flush().live_regions, 0u);
}

TEST_F(lease_book_test, ResolveGivesTheRefsOfLiveLeasesInOrder) {
  lease_book book;
  const auto a = book.add(region(4096), 4096);
  const auto b = book.add(region(8192), 8192);
  std::vector<byte_ref> refs;
  EXPECT_FALSE(book.resolve({b, a}, refs).has_value());
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[0].id(), b.id);
  EXPECT_EQ(refs[1].id(), a.id);
}

TEST_F(lease_book_test, ResolveNamesTheFirstMissAndALeaseOfTheSameIdInAnotherGeneration) {
  lease_book book;
  const auto a = book.add(region(4096), 4096);
  std::vector<byte_ref> refs;
  const region_handle other{a.id, a.generation + 1};
  const auto miss = book.resolve({a, other}, refs);
  ASSERT_TRUE(miss.has_value());
  EXPECT_EQ(miss->wanted, other);
  EXPECT_FALSE(miss->held_inert);
  EXPECT_EQ(miss->same_id, std::optional<region_handle>{a});
}

TEST_F(lease_book_test, LeasesOfAStoppedIncarnationHoldNothingButStayUntilReleased) {
  lease_book book;
  const auto h = book.add(region(4096), 4096);
  (void)uma_->stop();
  EXPECT_EQ(book.size(), 1u);  // it still counts against the lease cap
  EXPECT_EQ(book.held_bytes(), 0u);
  EXPECT_EQ(book.charged(), 0u);
  std::vector<byte_ref> refs;
  const auto miss = book.resolve({h}, refs);
  ASSERT_TRUE(miss.has_value());
  EXPECT_TRUE(miss->held_inert);
  int live = 0;
  book.for_each_live([&live](const region_handle&, const byte_ref&) { ++live; });
  EXPECT_EQ(live, 0);
  EXPECT_EQ(book.release(h), std::optional<std::uint64_t>{0});
  EXPECT_EQ(book.size(), 0u);
}

TEST_F(lease_book_test, ForEachLiveVisitsEveryLiveLeaseWithItsRef) {
  lease_book book;
  const auto a = book.add(region(4096), 4096);
  const auto b = book.add(region(8192), 8192);
  std::vector<region_handle> seen;
  book.for_each_live([&seen](const region_handle& h, const byte_ref& ref) {
    EXPECT_EQ(ref.id(), h.id);
    seen.push_back(h);
  });
  EXPECT_EQ(seen, (std::vector<region_handle>{std::min(a, b), std::max(a, b)}));
}

// Issue 35, finding 4: every Allocate summed the charges of every lease of the tenant and every
// GetStats the bytes of every lease. The totals are kept as leases come and go: a query visits
// no lease, however many there are.
TEST_F(lease_book_test, TotalsAreReadWithoutVisitingALease) {
  auto tenant = std::make_shared<lease_totals>();
  lease_book mine(tenant);
  lease_book other(tenant);
  constexpr int leases = 4096;
  for (int i = 0; i < leases; ++i)
    static_cast<void>(mine.add(region(64), 100));
  static_cast<void>(other.add(region(4096), 5000));
  const auto visited = mine.leases_visited() + other.leases_visited();
  EXPECT_EQ(mine.charged(), leases * 100u);
  EXPECT_EQ(mine.held_bytes(), leases * 64u);
  EXPECT_EQ(mine.live(), std::uint64_t{leases});
  EXPECT_EQ(tenant->charged(), leases * 100u + 5000u);
  EXPECT_EQ(tenant->held_bytes(), leases * 64u + 4096u);
  EXPECT_EQ(tenant->leases(), leases + 1u);
  EXPECT_EQ(mine.leases_visited() + other.leases_visited(), visited);
}

TEST_F(lease_book_test, ATenantsTotalsFollowEveryBookThatCountsInThem) {
  auto tenant = std::make_shared<lease_totals>();
  auto mine = std::make_unique<lease_book>(tenant);
  lease_book other(tenant);
  const auto a = mine->add(region(4096), 4100);
  static_cast<void>(mine->add(region(8192), 8200));
  static_cast<void>(other.add(region(4096), 4096));
  mine->reserve(1000);
  EXPECT_EQ(tenant->charged(), 4100u + 8200u + 4096u + 1000u);
  EXPECT_EQ(mine->release(a), std::optional<std::uint64_t>{4096});
  EXPECT_EQ(tenant->charged(), 8200u + 4096u + 1000u);
  EXPECT_EQ(tenant->held_bytes(), 8192u + 4096u);
  const auto gone = mine->release_all();
  EXPECT_EQ(gone.bytes, 8192u);
  EXPECT_EQ(tenant->charged(), 4096u + 1000u);  // the allocation underway still counts
  mine.reset();                                 // the session ended before it was answered
  EXPECT_EQ(tenant->charged(), 4096u);
  EXPECT_EQ(tenant->leases(), 1u);
}

// A restart makes the old incarnation's leases inert without telling the book: from then on they
// hold nothing and charge nothing, while the new incarnation's count in full.
TEST_F(lease_book_test, TotalsStayExactAcrossARestart) {
  auto tenant = std::make_shared<lease_totals>();
  lease_book book(tenant);
  const auto old_a = book.add(region(4096), 4100);
  static_cast<void>(book.add(region(8192), 8200));
  (void)uma_->stop();
  EXPECT_EQ(book.charged(), 0u);
  EXPECT_EQ(tenant->held_bytes(), 0u);
  EXPECT_EQ(tenant->leases(), 2u);  // inert leases still count against the lease cap
  const auto fresh = book.add(next_incarnation().allocate<std::byte>(12288), 12300);
  EXPECT_EQ(fresh.generation, 2u);
  EXPECT_EQ(book.charged(), 12300u);
  EXPECT_EQ(tenant->held_bytes(), 12288u);
  EXPECT_EQ(book.live(), 1u);
  EXPECT_EQ(book.release(old_a), std::optional<std::uint64_t>{0});  // its memory went before
  EXPECT_EQ(tenant->charged(), 12300u);
  EXPECT_EQ(tenant->leases(), 2u);
  const auto gone = book.release_all();
  EXPECT_EQ(gone.leases, 2u);
  EXPECT_EQ(gone.bytes, 12288u);
  EXPECT_EQ(tenant->charged(), 0u);
  EXPECT_EQ(tenant->leases(), 0u);
}

}  // namespace
}  // namespace uma
