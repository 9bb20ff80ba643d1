// The residency account (memory/residency_account.hpp): budgets, eviction order, the policies'
// moves and ledger, the automatic policy on a streaming pattern, a plan past the budget refused or
// (budget_overflow::map) partly mapped, bad input changing nothing.

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <uma/memory/residency_account.hpp>
#include <uma/sys/error.hpp>
#include "support/actor_fixture.hpp"  // UMA_EXPECT_ERROR

namespace uma {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;
using kind = residency_move_kind;
using policy = residency_policy;

class residency : public ::testing::Test {
 protected:
  residency() { account_.set_budget(0, 8 * MiB); }

  residency_plan use(std::uint64_t id, policy p = policy::migrate,
                     access_mode m = access_mode::read, std::size_t bytes = 4 * MiB) {
    const planned_region r{id, bytes, p};
    return account_.will_access({&r, 1}, 0, m);
  }
  void done(std::uint64_t id) { account_.done_with({&id, 1}); }

  residency_account account_{{64 * MiB, 64 * MiB}};
};

TEST_F(residency, ABudgetMustBeOneByteToTheDevicesMemoryOnADeviceThatExists) {
  UMA_EXPECT_ERROR(account_.set_budget(0, 0), errc::invalid_argument, "0 bytes on device 0");
  UMA_EXPECT_ERROR(account_.set_budget(1, 65 * MiB), errc::invalid_argument, "67108864 bytes");
  UMA_EXPECT_ERROR(account_.set_budget(2, MiB), errc::invalid_argument, "device 2 does not exist");
  UMA_EXPECT_ERROR(account_.set_budget(-1, MiB), errc::invalid_argument, "device -1");
  EXPECT_EQ(account_.device(0).budget, 8 * MiB);  // unchanged
  EXPECT_EQ(account_.device(1).budget, 0u);
}

TEST_F(residency, APlacementIsCountedInTheAccountAndTheLedgerAndHeldUntilDoneWith) {
  const auto plan = use(1);
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].kind, kind::to_device);
  EXPECT_EQ(plan.placements[0].bytes, 4 * MiB);
  EXPECT_TRUE(plan.evictions.empty());
  EXPECT_EQ(account_.device(0).resident, 4 * MiB);
  EXPECT_EQ(account_.device(0).held, 4 * MiB);
  EXPECT_EQ(account_.ledger(1)->to_device_bytes, 4 * MiB);
  EXPECT_TRUE(use(1).placements.empty());  // resident already: nothing moves, a second hold
  done(1);
  EXPECT_EQ(account_.device(0).held, 4 * MiB);
  done(1);
  EXPECT_EQ(account_.device(0).held, 0u);
  EXPECT_EQ(account_.resident_on(1), 0);
}

TEST_F(residency, EvictionTakesTheLeastRecentlyUsedRegionNoPlanHolds) {
  (void)use(1);
  (void)use(2);
  done(2);
  done(1);  // 1 was used before 2: 1 is the least recently used
  auto plan = use(3);
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].region, 1u);
  EXPECT_EQ(plan.evictions[0].kind, kind::to_host);
  EXPECT_EQ(account_.device(0).resident, 8 * MiB);
  // 3 is held: the next plan evicts 2, never 3.
  plan = use(4);
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].region, 2u);
  EXPECT_LE(account_.device(0).peak, 8 * MiB);
}

TEST_F(residency, ALoweredBudgetEvictsTheLeastRecentlyUsedUnheldRegionsAsAPlanWould) {
  (void)use(2, policy::read_mostly, access_mode::read, 2 * MiB);  // used in the order 2, 1, 3
  (void)use(1, policy::migrate, access_mode::read, 2 * MiB);
  (void)use(3, policy::migrate, access_mode::read, 2 * MiB);
  done(1);
  done(2);
  done(3);
  account_.set_budget(0, 3 * MiB);
  EXPECT_EQ(account_.device(0).resident, 6 * MiB);  // setting it moves nothing
  const auto plan = account_.shrink_to_budget(0);
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_EQ(plan.evictions.size(), 2u);
  EXPECT_EQ(plan.evictions[0].region, 2u);
  EXPECT_EQ(plan.evictions[0].kind, kind::drop_copy);  // an unwritten copy: as a plan drops it
  EXPECT_EQ(plan.evictions[1].region, 1u);
  EXPECT_EQ(plan.evictions[1].kind, kind::to_host);  // contents kept
  EXPECT_EQ(account_.device(0).resident, 2 * MiB);
  EXPECT_EQ(account_.resident_on(3), 0);
  EXPECT_EQ(account_.ledger(1)->evictions, 1u);
  EXPECT_EQ(account_.ledger(1)->to_host_bytes, 2 * MiB);
  EXPECT_EQ(account_.ledger(2)->dropped_bytes, 2 * MiB);
  EXPECT_EQ(account_.totals().evictions, 2u);
  EXPECT_TRUE(account_.shrink_to_budget(0).evictions.empty());  // within it now
}

TEST_F(residency, ALoweredBudgetKeepsHeldRegionsEvenAboveIt) {
  (void)use(1);
  (void)use(2);
  done(1);  // 2 stays held
  account_.set_budget(0, 2 * MiB);
  const auto plan = account_.shrink_to_budget(0);
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].region, 1u);
  EXPECT_EQ(account_.device(0).resident, 4 * MiB);  // above the budget: held
  EXPECT_EQ(account_.device(0).held, 4 * MiB);
  EXPECT_TRUE(account_.shrink_to_budget(0).evictions.empty());  // nothing more may go
  done(2);
  EXPECT_EQ(account_.shrink_to_budget(0).evictions.size(), 1u);  // done with: it goes now
  EXPECT_EQ(account_.device(0).resident, 0u);
}

TEST_F(residency, ARaisedOrUnchangedBudgetMovesNothing) {
  (void)use(1);
  (void)use(2);
  done(1);
  done(2);
  account_.set_budget(0, 8 * MiB);  // the same
  EXPECT_TRUE(account_.shrink_to_budget(0).evictions.empty());
  account_.set_budget(0, 16 * MiB);
  EXPECT_TRUE(account_.shrink_to_budget(0).evictions.empty());
  EXPECT_TRUE(account_.shrink_to_budget(1).evictions.empty());  // no budget: nothing to fit
  EXPECT_EQ(account_.device(0).resident, 8 * MiB);
  EXPECT_EQ(account_.totals().evictions, 0u);
  UMA_EXPECT_ERROR((void)account_.shrink_to_budget(2), errc::invalid_argument,
                   "device 2 does not exist");
}

TEST_F(residency, APlanTheBudgetCannotHoldIsRefusedAndChangesNothing) {
  (void)use(1);
  (void)use(2);  // both held: 8 MiB of 8
  const auto before = account_.totals();
  UMA_EXPECT_ERROR((void)use(3), errc::quota_exceeded, "8388608 held by plans");
  UMA_EXPECT_ERROR((void)use(9, policy::migrate, access_mode::read, 9 * MiB), errc::quota_exceeded,
                   "needs 9437184 more bytes on device 0");
  EXPECT_EQ(account_.device(0).resident, 8 * MiB);
  EXPECT_EQ(account_.totals().to_device_bytes, before.to_device_bytes);
  EXPECT_EQ(account_.regions(), 2u);
  EXPECT_FALSE(account_.ledger(3));
}

TEST_F(residency, EachPolicyEvictsItsOwnWay) {
  (void)use(1, policy::read_mostly);
  (void)use(2, policy::discard);
  done(1);
  done(2);
  auto plan = use(3, policy::migrate, access_mode::write, 8 * MiB);
  ASSERT_EQ(plan.evictions.size(), 2u);
  EXPECT_EQ(plan.evictions[0].kind, kind::drop_copy);  // a clean replica: nothing moves back
  EXPECT_EQ(plan.evictions[1].kind, kind::discard);    // scratch: dropped
  EXPECT_EQ(account_.totals().to_host_bytes, 0u);
  done(3);
  plan = use(4, policy::remote_map, access_mode::read, 32 * MiB);  // bigger than the budget: fine
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].kind, kind::map_remote);
  EXPECT_TRUE(plan.evictions.empty());
  EXPECT_EQ(account_.resident_on(4), std::nullopt);
  plan = use(1, policy::read_mostly, access_mode::write);  // written: its eviction moves bytes
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].kind, kind::to_host);  // 3, migrate, written
  done(1);
  done(4);
  plan = use(5, policy::migrate, access_mode::read, 8 * MiB);
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].region, 1u);
  EXPECT_EQ(plan.evictions[0].kind, kind::to_host);  // a written replica goes back
  EXPECT_EQ(account_.totals().to_host_bytes, 12 * MiB);
}

TEST_F(residency, AutomaticMapsARegionThatStreamsThroughTheBudgetAndStopsMovingIt) {
  // Four 4 MiB regions read in turn, three passes, budget 8 MiB: the set is twice the budget.
  std::vector<std::uint64_t> to_device_per_pass;
  for (int pass = 0; pass < 3; ++pass) {
    const auto before = account_.totals().to_device_bytes;
    for (std::uint64_t id = 1; id <= 4; ++id) {
      (void)use(id, policy::automatic);
      done(id);
      EXPECT_LE(account_.device(0).resident, 8 * MiB);
    }
    to_device_per_pass.push_back(account_.totals().to_device_bytes - before);
  }
  EXPECT_EQ(to_device_per_pass[0], 16 * MiB);  // first pass: read-mostly copies, 1 and 2 evicted
  EXPECT_EQ(to_device_per_pass[1], 0u);        // 1 and 2 asked for again after an unused eviction:
  EXPECT_EQ(to_device_per_pass[2], 0u);        // mapped from now on; 3 and 4 stay resident
  EXPECT_EQ(account_.effective_policy(1), policy::remote_map);
  EXPECT_EQ(account_.effective_policy(2), policy::remote_map);
  EXPECT_EQ(account_.effective_policy(4), policy::read_mostly);
  EXPECT_EQ(account_.resident_on(4), 0);
  EXPECT_EQ(account_.totals().to_host_bytes, 0u);  // read-mostly evictions drop copies
  EXPECT_EQ(account_.totals().refetches, 0u);
}

TEST_F(residency, ARemoteMappingIsAdvisedOnceAndUndoneBeforeTheRegionMoves) {
  auto plan = use(1, policy::remote_map);
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].kind, kind::map_remote);
  done(1);
  plan = use(1, policy::remote_map);  // already mapped for device 0: no advice again
  EXPECT_TRUE(plan.placements.empty());
  EXPECT_TRUE(plan.evictions.empty());
  done(1);
  plan = use(1, policy::migrate);  // now placed: the mapping's advice goes first
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].kind, kind::to_device);
  EXPECT_TRUE(plan.placements[0].unmap_first);
  done(1);
  plan = use(2, policy::migrate);  // never mapped: nothing to undo
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_FALSE(plan.placements[0].unmap_first);
  done(2);
  plan = use(1, policy::remote_map);  // out of the device, then mapped again
  ASSERT_EQ(plan.evictions.size(), 1u);
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].kind, kind::map_remote);
}

TEST_F(residency, TheHostBecomesPreferredOnceAndOnlyACopyIsDropped) {
  auto plan = use(1, policy::read_mostly);
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_TRUE(plan.placements[0].prefer_host);  // first copy: the host becomes preferred
  done(1);
  (void)use(2, policy::migrate);  // the budget (8 MiB) is full now
  done(2);
  plan = use(3, policy::migrate);
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].region, 1u);
  EXPECT_EQ(plan.evictions[0].kind, kind::drop_copy);
  done(3);
  plan = use(1, policy::read_mostly);  // placed again: the host is preferred already
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_FALSE(plan.placements[0].prefer_host);
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].kind, kind::to_host);  // 2, migrated
  done(1);
  // Region 3 was migrated; asked for as read-mostly while resident it is no copy: its eviction
  // moves it back instead of dropping what is its only copy.
  plan = use(3, policy::read_mostly);
  EXPECT_TRUE(plan.placements.empty());
  done(3);
  plan = use(4, policy::migrate, access_mode::read, 8 * MiB);
  ASSERT_EQ(plan.evictions.size(), 2u);
  for (const auto& m : plan.evictions)
    EXPECT_EQ(m.kind, m.region == 1 ? kind::drop_copy : kind::to_host) << "region " << m.region;
}

TEST_F(residency, AutomaticKeepsWhatFitsOfAKnownCycleResidentAndMapsTheRest) {
  // The same four 4 MiB regions, read in turn for three passes, but the plans carry their cycle
  // (16 MiB in 4 plans, twice the budget): 1 and 2 are placed and stay, 3 and 4 are mapped from
  // their first use, and nothing is evicted, ever.
  const cycle_hint cycle{16 * MiB, 4};
  std::vector<std::uint64_t> to_device_per_pass;
  for (int pass = 0; pass < 3; ++pass) {
    const auto before = account_.totals().to_device_bytes;
    for (std::uint64_t id = 1; id <= 4; ++id) {
      const planned_region r{id, 4 * MiB, policy::automatic, "", "", cycle};
      const auto plan = account_.will_access({&r, 1}, 0, access_mode::read);
      EXPECT_TRUE(plan.evictions.empty()) << "pass " << pass << ", region " << id;
      done(id);
    }
    to_device_per_pass.push_back(account_.totals().to_device_bytes - before);
  }
  EXPECT_EQ(to_device_per_pass, (std::vector<std::uint64_t>{8 * MiB, 0, 0}));
  EXPECT_EQ(account_.effective_policy(1), policy::read_mostly);
  EXPECT_EQ(account_.resident_on(2), 0);
  EXPECT_EQ(account_.effective_policy(3), policy::remote_map);
  EXPECT_EQ(account_.effective_policy(4), policy::remote_map);
  EXPECT_EQ(account_.totals().evictions, 0u);
}

TEST_F(residency, ACycleStillEvictsRegionsItHasNotUsedForAWholeCycle) {
  (void)use(9, policy::automatic, access_mode::read, 8 * MiB);  // fills the budget, then idles
  done(9);
  for (std::uint64_t id = 10; id < 14; ++id) {  // four plans elsewhere (on device 1)
    const planned_region r{id, 4 * MiB, policy::migrate};
    (void)account_.will_access({&r, 1}, 1, access_mode::read);
  }
  const planned_region r{1, 4 * MiB, policy::automatic, "", "", cycle_hint{16 * MiB, 4}};
  const auto plan = account_.will_access({&r, 1}, 0, access_mode::read);
  ASSERT_EQ(plan.evictions.size(), 1u);  // region 9 is not the cycle's: it goes
  EXPECT_EQ(plan.evictions[0].region, 9u);
  EXPECT_EQ(account_.effective_policy(1), policy::read_mostly);
  EXPECT_EQ(account_.resident_on(1), 0);
}

TEST_F(residency, AutomaticKeepsAReusedRegionResidentAndMigratesWrittenOnes) {
  for (int step = 0; step < 5; ++step) {
    (void)use(1, policy::automatic, access_mode::write);
    done(1);
  }
  EXPECT_EQ(account_.effective_policy(1), policy::migrate);
  EXPECT_EQ(account_.ledger(1)->to_device_bytes, 4 * MiB);  // placed once, reused in place
}

TEST_F(residency, DeadContentsAreDiscardedAndNothingMovesBack) {
  (void)use(1, policy::migrate, access_mode::write);
  UMA_EXPECT_ERROR((void)account_.dead(std::vector<std::uint64_t>{1}), errc::invalid_argument,
                   "held by 1 plan");
  done(1);
  const auto plan = account_.dead(std::vector<std::uint64_t>{1});
  ASSERT_EQ(plan.evictions.size(), 1u);
  EXPECT_EQ(plan.evictions[0].kind, kind::discard);
  EXPECT_EQ(account_.device(0).resident, 0u);
  EXPECT_EQ(account_.ledger(1)->to_host_bytes, 0u);
  EXPECT_EQ(account_.ledger(1)->discarded_bytes, 4 * MiB);
}

TEST_F(residency, BadPlansAreRefusedNamingWhatIsWrongAndChangeNothing) {
  (void)use(1);
  const planned_region dup[] = {{2, MiB, policy::migrate}, {2, MiB, policy::migrate}};
  UMA_EXPECT_ERROR((void)account_.will_access(dup, 0, access_mode::read), errc::invalid_argument,
                   "region 2 is named twice");
  UMA_EXPECT_ERROR((void)use(1, policy::migrate, access_mode::read, MiB), errc::invalid_argument,
                   "region 1 has 4194304 bytes; the plan says 1048576");
  UMA_EXPECT_ERROR((void)use(3, policy::migrate, access_mode::read, 0), errc::invalid_argument,
                   "region 3 has 0 bytes");
  UMA_EXPECT_ERROR((void)use(3, static_cast<policy>(9)), errc::invalid_argument, "policy 9");
  UMA_EXPECT_ERROR((void)use(3, policy::migrate, static_cast<access_mode>(7)),
                   errc::invalid_argument, "access mode");
  UMA_EXPECT_ERROR((void)account_.will_access({}, 0, access_mode::read), errc::invalid_argument,
                   "names no region");
  const planned_region on1{1, 4 * MiB, policy::migrate};
  UMA_EXPECT_ERROR((void)account_.will_access({&on1, 1}, 1, access_mode::read),
                   errc::invalid_argument, "held by a plan on device 0");
  UMA_EXPECT_ERROR((void)account_.will_access({&on1, 1}, 5, access_mode::read),
                   errc::invalid_argument, "device 5 does not exist");
  UMA_EXPECT_ERROR(account_.done_with(std::vector<std::uint64_t>{7}), errc::invalid_argument,
                   "region 7 is in no plan");
  UMA_EXPECT_ERROR(account_.done_with(std::vector<std::uint64_t>{1, 1}), errc::invalid_argument,
                   "held by 1 plan(s), not 2");
  EXPECT_EQ(account_.regions(), 1u);
  EXPECT_EQ(account_.device(0).resident, 4 * MiB);
  EXPECT_EQ(account_.device(0).held, 4 * MiB);
  EXPECT_EQ(account_.totals().placements, 1u);
}

// -- budget_overflow::map (docs/residency.md "Overflow: refuse or map") ------------------------

class overflow_map : public residency {
 protected:
  overflow_map() { account_.set_overflow(budget_overflow::map); }

  residency_plan plan(std::vector<planned_region> regions, std::string tenant = {}) {
    for (auto& r : regions)
      r.tenant = tenant;
    return account_.will_access(regions, 0, access_mode::read);
  }
};

TEST_F(overflow_map, APlanPastTheBudgetPlacesWhatFitsInItsOrderAndMapsTheRest) {
  // 4 + 6 + 2 MiB under 8: 1 fits, 2 does not (10), 3 still does (6).
  const auto p = plan({{1, 4 * MiB, policy::migrate},
                       {2, 6 * MiB, policy::migrate},
                       {3, 2 * MiB, policy::migrate}});
  EXPECT_TRUE(p.evictions.empty());
  ASSERT_EQ(p.placements.size(), 3u);
  EXPECT_EQ(p.placements[0].kind, kind::to_device);
  EXPECT_EQ(p.placements[1].kind, kind::map_remote);
  EXPECT_EQ(p.placements[1].region, 2u);
  EXPECT_EQ(p.placements[1].policy, policy::remote_map);
  EXPECT_TRUE(p.placements[1].prefer_host);  // preferred location host + accessed-by the device
  EXPECT_EQ(p.placements[2].kind, kind::to_device);
  EXPECT_EQ(p.overflow_bytes, 6 * MiB);
  EXPECT_EQ(account_.device(0).resident, 6 * MiB);
  EXPECT_EQ(account_.device(0).held, 6 * MiB);
  EXPECT_EQ(account_.resident_on(2), std::nullopt);
  EXPECT_EQ(account_.effective_policy(2), policy::remote_map);
  EXPECT_EQ(account_.ledger(2)->to_device_bytes, 0u);  // nothing moved for it
}

TEST_F(overflow_map, UnheldRegionsAreEvictedFirstAndOnlyWhatStillDoesNotFitIsMapped) {
  (void)use(1);
  done(1);
  (void)use(2);  // held: 4 MiB of 8 can go (1), 4 cannot (2)
  const auto p = plan({{3, 4 * MiB, policy::migrate}, {4, 4 * MiB, policy::migrate}});
  ASSERT_EQ(p.evictions.size(), 1u);
  EXPECT_EQ(p.evictions[0].region, 1u);
  ASSERT_EQ(p.placements.size(), 2u);
  EXPECT_EQ(p.placements[0].kind, kind::to_device);
  EXPECT_EQ(p.placements[1].kind, kind::map_remote);
  EXPECT_EQ(p.overflow_bytes, 4 * MiB);
  EXPECT_EQ(account_.device(0).resident, 8 * MiB);
}

TEST_F(overflow_map, HeldRegionsFillingTheBudgetMapTheWholeNextPlan) {
  (void)use(1);
  (void)use(2);  // both held: 8 MiB of 8
  const auto p = plan({{3, 4 * MiB, policy::migrate}, {4, 2 * MiB, policy::automatic}});
  EXPECT_TRUE(p.evictions.empty());
  ASSERT_EQ(p.placements.size(), 2u);
  for (const auto& m : p.placements)
    EXPECT_EQ(m.kind, kind::map_remote) << "region " << m.region;
  EXPECT_EQ(p.overflow_bytes, 6 * MiB);
  EXPECT_EQ(account_.device(0).resident, 8 * MiB);
  // Mapped already: a second plan moves nothing, and says the bytes again.
  const auto again = plan({{3, 4 * MiB, policy::migrate}});
  EXPECT_TRUE(again.placements.empty());
  EXPECT_EQ(again.overflow_bytes, 4 * MiB);
}

TEST_F(overflow_map, AMappedRegionIsPlacedByALaterPlanWithRoomTheMappingUndoneFirst) {
  (void)use(1);
  (void)use(2);
  (void)use(3);  // mapped: no room
  done(3);
  done(1);
  done(2);
  const auto p = use(3);
  ASSERT_EQ(p.evictions.size(), 1u);
  EXPECT_EQ(p.evictions[0].region, 1u);  // the least recently used
  ASSERT_EQ(p.placements.size(), 1u);
  EXPECT_EQ(p.placements[0].kind, kind::to_device);
  EXPECT_TRUE(p.placements[0].unmap_first);
  EXPECT_EQ(p.overflow_bytes, 0u);
  EXPECT_EQ(account_.resident_on(3), 0);
  EXPECT_EQ(account_.effective_policy(3), policy::migrate);
}

TEST_F(overflow_map, AnAutomaticRegionMappedForWantOfRoomIsNotStreamedForGood) {
  (void)use(1);
  (void)use(2);
  (void)use(3, policy::automatic);  // mapped for want of room, not by the automatic policy
  EXPECT_EQ(account_.effective_policy(3), policy::remote_map);
  done(3);
  done(1);
  const auto p = use(3, policy::automatic);  // room now (1 may go): placed, as a copy
  ASSERT_EQ(p.placements.size(), 1u);
  EXPECT_EQ(p.placements[0].kind, kind::to_device);
  EXPECT_EQ(account_.effective_policy(3), policy::read_mostly);
  EXPECT_EQ(account_.resident_on(3), 0);
}

TEST_F(overflow_map, ATenantsBudgetMapsWhatItCannotHold) {
  account_.set_tenant_budget("t", 0, 4 * MiB);
  const auto p = plan({{1, 2 * MiB, policy::migrate}, {2, 4 * MiB, policy::migrate}}, "t");
  ASSERT_EQ(p.placements.size(), 2u);
  EXPECT_EQ(p.placements[0].kind, kind::to_device);
  EXPECT_EQ(p.placements[1].kind, kind::map_remote);
  EXPECT_EQ(p.overflow_bytes, 4 * MiB);
  EXPECT_EQ(account_.tenant("t", 0).resident, 2 * MiB);
  EXPECT_EQ(account_.device(0).resident, 2 * MiB);  // the device had room: the tenant had not
}

TEST_F(overflow_map, DeviceMemoryReservedPastTheBudgetIsStillRefused) {
  (void)use(1);
  (void)use(2);
  const planned_region tier{9, 4 * MiB, policy::migrate};
  UMA_EXPECT_ERROR((void)account_.reserve({&tier, 1}, 0), errc::quota_exceeded,
                   "8388608 held by plans");
  UMA_EXPECT_ERROR(account_.check_reserve(0, 4 * MiB), errc::quota_exceeded, "held by plans");
}

TEST_F(overflow_map, RandomPlansAreNeverRefusedAndStayWithinTheBudget) {
  std::mt19937 rng(777);
  std::vector<std::vector<std::uint64_t>> held(4);
  std::size_t overflowed = 0;
  for (int step = 0; step < 2000; ++step) {
    auto& mine = held[rng() % 4];
    if (!mine.empty()) {
      account_.done_with(mine);
      mine.clear();
      continue;
    }
    std::vector<planned_region> regions;
    for (std::uint64_t id = 1 + rng() % 30, n = 1 + rng() % 4; n > 0; --n, id = 1 + id % 30)
      regions.push_back({id, (1 + id % 3) * MiB, static_cast<policy>(id % 5)});
    const auto p = account_.will_access(regions, 0, access_mode::write);  // never throws
    overflowed += p.overflow_bytes;
    for (const auto& r : regions)
      mine.push_back(r.id);
    ASSERT_LE(account_.device(0).resident, 8 * MiB) << "step " << step;
  }
  EXPECT_GT(overflowed, 0u);  // the budget was passed: the test exercised the overflow
}

TEST_F(residency, AnOverflowModeThatDoesNotExistIsRefused) {
  EXPECT_EQ(account_.overflow(), budget_overflow::refuse);  // the default
  UMA_EXPECT_ERROR(account_.set_overflow(static_cast<budget_overflow>(7)), errc::invalid_argument,
                   "budget_overflow 7 does not exist");
  EXPECT_EQ(account_.overflow(), budget_overflow::refuse);  // unchanged
  account_.set_overflow(budget_overflow::map);
  EXPECT_EQ(account_.overflow(), budget_overflow::map);
}

TEST_F(residency, ForgetAndClearTakeRegionsOutOfTheAccountButKeepTheirLedgerInTheTotals) {
  (void)use(1);
  (void)use(2);
  account_.forget(1);
  EXPECT_EQ(account_.device(0).resident, 4 * MiB);
  EXPECT_EQ(account_.totals().to_device_bytes, 8 * MiB);
  account_.clear();  // the allocator stopped: holds go too
  EXPECT_EQ(account_.device(0).resident, 0u);
  EXPECT_EQ(account_.device(0).held, 0u);
  EXPECT_EQ(account_.regions(), 0u);
  EXPECT_EQ(account_.totals().to_device_bytes, 8 * MiB);
  EXPECT_EQ(account_.device(0).peak, 8 * MiB);
}

TEST_F(residency, PlansFromEightClientsNeverTakeTheAccountPastTheBudget) {
  // Eight clients each hold at most one plan of one to three regions at a time, in a random
  // interleaving; after every call the account stays within the budget and adds up.
  std::mt19937 rng(12345);
  std::vector<std::vector<std::uint64_t>> held(8);
  const policy policies[] = {policy::migrate, policy::read_mostly, policy::discard,
                             policy::remote_map, policy::automatic};
  std::uint64_t refused = 0, planned = 0;
  for (int step = 0; step < 4000; ++step) {
    auto& mine = held[rng() % 8];
    if (!mine.empty()) {
      account_.done_with(mine);
      mine.clear();
      continue;
    }
    std::vector<planned_region> plan;
    const auto n = 1 + rng() % 3;
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint64_t id = 1 + rng() % 40;
      bool named = false;
      for (const auto& r : plan)
        named = named || r.id == id;
      if (!named)
        plan.push_back({id, (1 + id % 3) * MiB, policies[id % 5]});
    }
    try {
      (void)account_.will_access(plan, 0, rng() % 2 ? access_mode::read : access_mode::write);
      for (const auto& r : plan)
        mine.push_back(r.id);
      ++planned;
    } catch (const error& e) {
      ASSERT_TRUE(e.code() == errc::quota_exceeded || e.code() == errc::invalid_argument)
          << e.what();
      ++refused;
    }
    const auto d = account_.device(0);
    ASSERT_LE(d.resident, 8 * MiB) << "step " << step;
    ASSERT_LE(d.held, d.resident);
    std::size_t sum = 0;
    for (std::uint64_t id = 1; id <= 40; ++id)
      if (account_.resident_on(id) == 0)
        sum += (1 + id % 3) * MiB;
    ASSERT_EQ(sum, d.resident) << "step " << step;
  }
  EXPECT_GT(planned, 1000u);
  EXPECT_GT(refused, 0u);  // the budget did refuse plans: the test exercised it
  EXPECT_LE(account_.device(0).peak, 8 * MiB);
}

}  // namespace
}  // namespace uma
