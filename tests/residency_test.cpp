// Residency through the allocator (issue 15, docs/residency.md), on the host backend: its
// emulated devices (allocator_config::backend.host_devices) take the moves: recorded, no data
// copied. Budgets under concurrent plans, freed regions leaving the account, plans racing a
// restart, bad plans changing nothing, plans past the budget mapping what does not fit.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <caf/scoped_actor.hpp>

#include "support/actor_fixture.hpp"

namespace uma {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

class residency_plans : public test::actor_fixture {
 protected:
  residency_plans() {
    uma_ = make_client(one_device_config());
    uma_->device_budget(0, 16 * MiB);
  }

  std::vector<byte_ref> regions(std::size_t n, std::size_t bytes) {
    std::vector<byte_ref> out;
    for (std::size_t i = 0; i < n; ++i)
      out.push_back(client::erase(uma_->allocate<std::byte>(bytes)));
    return out;
  }

  std::size_t resident() { return uma_->residency().devices.at(0).resident; }

  /// An allocator whose plans map what its 16 MiB budget cannot hold instead of being refused.
  std::unique_ptr<client> overflowing() {
    auto c = one_device_config();
    c.residency.device_budgets = {{0, 16 * MiB}};
    c.residency.overflow = budget_overflow::map;
    return make_client(std::move(c));
  }
};

TEST_F(residency_plans, AnAsyncPlanIsAnsweredByGetOnceAndARefusalComesThroughIt) {
  auto r = regions(3, 8 * MiB);
  auto first = uma_->will_access_async({r[0]}, 0, access_mode::read, residency_policy::migrate);
  auto refused = uma_->will_access_async({r[1], r[2]}, 0, access_mode::read,
                                         residency_policy::migrate);  // 16 more: r[0] is held
  EXPECT_TRUE(first.valid());
  EXPECT_EQ(first.get().to_device_bytes, 8 * MiB);
  EXPECT_FALSE(first.valid());
  UMA_EXPECT_ERROR(first.get(), errc::invalid_argument, "its reply was taken already");
  UMA_EXPECT_ERROR(refused.get(), errc::quota_exceeded, "budget");
  EXPECT_EQ(resident(), 8 * MiB);  // the refused plan changed nothing
  auto moved = uma_->will_access_async({r[1]}, 0, access_mode::read, residency_policy::migrate);
  auto taken = std::move(moved);
  EXPECT_FALSE(moved.valid());  // NOLINT(bugprone-use-after-move): what a move leaves
  EXPECT_EQ(taken.get().placements, 1u);
  EXPECT_EQ(uma_->residency().devices.at(0).held, 16 * MiB);
}

TEST_F(residency_plans, PlansKeepTheDeviceWithinItsBudgetAndTheLedgerCountsEveryMove) {
  auto r = regions(4, 6 * MiB);
  auto placed = uma_->will_access({r[0], r[1]}, 0, access_mode::write, residency_policy::migrate);
  EXPECT_EQ(placed.to_device_bytes, 12 * MiB);
  EXPECT_EQ(placed.placements, 2u);
  EXPECT_EQ(uma_->done_with({r[0], r[1]}), 2u);
  // 12 MiB resident, 6 more do not fit under 16: the least recently used goes back first.
  auto next = uma_->will_access({r[2]}, 0, access_mode::read, residency_policy::migrate);
  EXPECT_EQ(next.evictions, 1u);
  EXPECT_EQ(next.to_host_bytes, 6 * MiB);
  EXPECT_EQ(next.to_device_bytes, 6 * MiB);
  const auto report = uma_->residency();
  ASSERT_EQ(report.devices.size(), 1u);
  EXPECT_EQ(report.devices[0].resident, 12 * MiB);
  EXPECT_EQ(report.devices[0].held, 6 * MiB);
  EXPECT_EQ(report.devices[0].budget, 16 * MiB);
  EXPECT_LE(report.devices[0].peak, 16 * MiB);
  EXPECT_EQ(report.totals.to_device_bytes, 18 * MiB);
  EXPECT_EQ(report.totals.to_host_bytes, 6 * MiB);
  EXPECT_NE(report.moves.find("emulated devices (counted, no data copied)"), std::string::npos)
      << report.moves;
  // The moves were made on the emulated device: the placed region's pages say where it went.
  EXPECT_EQ(uma_->attributes(r[2]).last_prefetch_location, location::device(0));
  // Dead data: discarded, nothing moves back.
  uma_->done_with({r[2]});
  const auto dead = uma_->dead({r[2]});
  EXPECT_EQ(dead.discarded_bytes, 6 * MiB);
  EXPECT_EQ(dead.to_host_bytes, 0u);
  EXPECT_EQ(uma_->residency().totals.to_host_bytes, 6 * MiB);
}

TEST_F(residency_plans, EightClientsPlanningAtOnceNeverTakeTheDevicePastItsBudget) {
  constexpr int clients = 8;
  std::vector<std::vector<byte_ref>> mine;
  for (int c = 0; c < clients; ++c)
    mine.push_back(regions(3, 2 * MiB));
  std::atomic<int> done{0}, refused{0}, planned{0}, other{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      for (int step = 0; step < 60; ++step) {
        const auto& r = mine[static_cast<std::size_t>(c)];
        // One region on odd steps, two on even ones.
        const auto first = static_cast<std::size_t>(step % 3);
        std::vector<byte_ref> plan(r.begin() + static_cast<std::ptrdiff_t>(first),
                                   r.begin() + static_cast<std::ptrdiff_t>(first + 1));
        if (step % 2 == 0)
          plan.insert(plan.end(), r[(first + 1) % 3]);
        try {
          (void)uma_->will_access(
              plan, 0, step % 4 == 0 ? access_mode::write : access_mode::read,
              step % 5 == 0 ? residency_policy::migrate : residency_policy::automatic);
          ++planned;
          uma_->done_with(plan);
        } catch (const error& e) {
          (e.code() == errc::quota_exceeded ? refused : other)++;
        }
      }
      ++done;
    });
  std::size_t worst = 0;
  while (done.load() < clients) {
    const auto d = uma_->residency().devices.at(0);
    worst = std::max(worst, d.resident);
    ASSERT_LE(d.held, d.resident);
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(planned.load(), 0);
  EXPECT_LE(worst, 16 * MiB);
  const auto d = uma_->residency().devices.at(0);
  EXPECT_LE(d.peak, 16 * MiB);
  EXPECT_EQ(d.held, 0u);
}

TEST_F(residency_plans, AFreedRegionLeavesTheAccount) {
  auto r = regions(1, 4 * MiB);
  (void)uma_->will_access(r, 0, access_mode::read);
  uma_->done_with(r);
  EXPECT_EQ(resident(), 4 * MiB);
  r.clear();  // the last ref: the allocator frees the region, the account forgets it
  EXPECT_EQ(resident(), 0u);
  EXPECT_EQ(uma_->residency().totals.to_device_bytes, 4 * MiB);  // the ledger keeps it
}

TEST_F(residency_plans, BadPlansAreRefusedNamingWhatIsWrongAndChangeNothing) {
  auto r = regions(2, 4 * MiB);
  (void)uma_->will_access({r[0]}, 0, access_mode::read);
  const auto before = uma_->residency();
  UMA_EXPECT_ERROR((void)uma_->will_access({byte_ref{}}, 0, access_mode::read),
                   errc::invalid_argument, "will_access");
  UMA_EXPECT_ERROR((void)uma_->will_access({r[1]}, 3, access_mode::read), errc::invalid_argument,
                   "device 3 does not exist");
  UMA_EXPECT_ERROR(
      (void)uma_->will_access({r[1]}, 0, access_mode::read, static_cast<residency_policy>(42)),
      errc::invalid_argument, "policy 42");
  UMA_EXPECT_ERROR(uma_->device_budget(0, 65 * MiB), errc::invalid_argument,
                   "must be 1 byte to the device's 67108864 bytes");
  UMA_EXPECT_ERROR((void)uma_->done_with({r[1]}), errc::invalid_argument, "is in no plan");
  UMA_EXPECT_ERROR((void)uma_->dead({r[0]}), errc::invalid_argument, "held by 1 plan");
  (void)uma_->will_access({r[1]}, 0, access_mode::read, residency_policy::migrate);  // valid
  const auto after = uma_->residency();
  EXPECT_EQ(after.devices[0].budget, before.devices[0].budget);
  EXPECT_EQ(after.totals.placements, before.totals.placements + 1);  // only the last, valid one
}

TEST_F(residency_plans, WithoutEmulatedDevicesTheHostBackendRefusesPlansClearly) {
  auto plain = make_client(
      {.backend = {.instance = std::make_shared<host_backend>(emulated_devices{0, 0})}});
  auto ref = client::erase(plain->allocate<std::byte>(4096));
  UMA_EXPECT_ERROR((void)plain->will_access({ref}, 0, access_mode::read), errc::invalid_argument,
                   "device 0 does not exist (devices: 0)");
  EXPECT_TRUE(plain->residency().devices.empty());
}

TEST_F(residency_plans, ABadBudgetInTheConfigIsRefusedBeforeTheAllocatorStarts) {
  auto c = one_device_config();
  c.residency.device_budgets = {{0, 128 * MiB}};
  UMA_EXPECT_ERROR((void)make_client(c), errc::invalid_argument, "134217728 bytes on device 0");
}

TEST_F(residency_plans, ABadOverflowModeInTheConfigIsRefusedBeforeTheAllocatorStarts) {
  auto c = one_device_config();
  c.residency.overflow = static_cast<budget_overflow>(9);
  UMA_EXPECT_ERROR((void)make_client(c), errc::invalid_argument,
                   "budget_overflow 9 does not exist");
}

TEST_F(residency_plans, ARestartEndsEveryPlanTheBudgetOutlivesItAndOldRefsAreRefused) {
  supervisor_config cfg;
  cfg.allocator = one_device_config();
  client supervised(sys_, cfg);
  supervised.set_max_block_bytes(0);
  EXPECT_EQ(supervised.device_budget(0, 8 * MiB), 8 * MiB);
  auto old_ref = client::erase(supervised.allocate<std::byte>(4 * MiB));
  (void)supervised.will_access({old_ref}, 0, access_mode::write);
  EXPECT_EQ(supervised.residency().devices.at(0).held, 4 * MiB);
  caf::scoped_actor self{sys_};
  self->request(*supervised.supervisor(), std::chrono::seconds(20), restart_atom_v)
      .receive([](std::uint64_t generation) { EXPECT_EQ(generation, 2u); },
               [&](caf::error& e) { FAIL() << sys_.render(e); });
  const auto report = supervised.residency();
  EXPECT_EQ(report.devices.at(0).resident, 0u);  // a new incarnation: the account is empty
  EXPECT_EQ(report.devices.at(0).held, 0u);
  EXPECT_EQ(report.devices.at(0).budget, 8 * MiB);  // the budget set before the restart holds
  UMA_EXPECT_ERRC((void)supervised.will_access({old_ref}, 0, access_mode::read),
                  errc::allocator_stopped);
  UMA_EXPECT_ERRC((void)supervised.done_with({old_ref}), errc::allocator_stopped);
  EXPECT_FALSE(old_ref.valid());
}

// -- a lowered budget evicts at once (docs/residency.md "Budgets") ------------------------------

/// `n` regions of `bytes` on `c`'s device 0, each planned (written) and done with in turn: the
/// first is the least recently used.
std::vector<byte_ref> used_in_turn(client& c, std::size_t n, std::size_t bytes) {
  std::vector<byte_ref> out;
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(client::erase(c.allocate<std::byte>(bytes)));
    (void)c.will_access({out.back()}, 0, access_mode::write, residency_policy::migrate);
    (void)c.done_with({out.back()});
  }
  return out;
}

TEST_F(residency_plans, ALoweredBudgetEvictsTheLeastRecentlyUsedExtentsBeforeItReplies) {
  auto b = std::make_shared<host_backend>(emulated_devices{1, 64 * MiB});
  auto c = one_device_config();
  c.backend.instance = b;
  auto uma = make_client(c);
  (void)uma->device_budget(0, 16 * MiB);
  const auto r = used_in_turn(*uma, 3, 4 * MiB);
  const auto prefetches = b->counters().prefetch_calls;
  EXPECT_EQ(uma->device_budget(0, 6 * MiB), 6 * MiB);
  // The two least recently used went back to the host, their contents with them, before the
  // reply: the backend made both moves already.
  EXPECT_EQ(b->counters().prefetch_calls, prefetches + 2);
  const auto report = uma->residency();
  EXPECT_EQ(report.devices.at(0).budget, 6 * MiB);
  EXPECT_EQ(report.devices.at(0).resident, 4 * MiB);
  EXPECT_EQ(report.totals.evictions, 2u);
  EXPECT_EQ(report.totals.to_host_bytes, 8 * MiB);
  EXPECT_EQ(uma->attributes(r[0]).last_prefetch_location, location::host());
  EXPECT_EQ(uma->attributes(r[1]).last_prefetch_location, location::host());
  EXPECT_EQ(uma->attributes(r[2]).last_prefetch_location, location::device(0));
}

TEST_F(residency_plans, ALoweredBudgetKeepsHeldExtentsAndStillReplies) {
  const auto r = used_in_turn(*uma_, 1, 4 * MiB);
  auto held = client::erase(uma_->allocate<std::byte>(4 * MiB));
  (void)uma_->will_access({held}, 0, access_mode::write, residency_policy::migrate);
  EXPECT_EQ(uma_->device_budget(0, 2 * MiB), 2 * MiB);
  const auto d = uma_->residency().devices.at(0);
  EXPECT_EQ(d.budget, 2 * MiB);
  EXPECT_EQ(d.resident, 4 * MiB);  // above the budget: the held extent stays
  EXPECT_EQ(d.held, 4 * MiB);
  EXPECT_EQ(uma_->residency().totals.evictions, 1u);  // the unheld one went
  EXPECT_EQ(uma_->done_with({held}), 1u);
}

TEST_F(residency_plans, ARaisedOrUnchangedBudgetMovesNothing) {
  const auto r = used_in_turn(*uma_, 2, 4 * MiB);  // kept: a freed region leaves the account
  EXPECT_EQ(uma_->device_budget(0, 16 * MiB), 16 * MiB);
  EXPECT_EQ(uma_->device_budget(0, 32 * MiB), 32 * MiB);
  EXPECT_EQ(uma_->device_budget(0), 32 * MiB);
  const auto report = uma_->residency();
  EXPECT_EQ(report.devices.at(0).resident, 8 * MiB);
  EXPECT_EQ(report.totals.evictions, 0u);
}

TEST_F(residency_plans, ABudgetLoweredThroughTheSupervisorEvictsBeforeItsReply) {
  supervisor_config cfg;
  cfg.allocator = one_device_config();
  client supervised(sys_, cfg);
  EXPECT_EQ(supervised.device_budget(0, 16 * MiB), 16 * MiB);
  const auto r = used_in_turn(supervised, 3, 4 * MiB);
  EXPECT_EQ(supervised.device_budget(0, 4 * MiB), 4 * MiB);
  const auto report = supervised.residency();
  EXPECT_EQ(report.devices.at(0).resident, 4 * MiB);
  EXPECT_EQ(report.totals.evictions, 2u);
  EXPECT_EQ(report.totals.to_host_bytes, 8 * MiB);
}

// -- budget_overflow::map: what does not fit is mapped (docs/residency.md "Overflow") ----------

/// Preferred location host, accessed by device 0, never prefetched: what remote_map makes.
void expect_mapped(client& c, const byte_ref& r) {
  const auto a = c.attributes(r);
  EXPECT_EQ(a.preferred_location, location::host());
  EXPECT_EQ(a.accessed_by, std::vector<location>{location::device(0)});
  EXPECT_EQ(a.last_prefetch_location, std::nullopt);
}

TEST_F(residency_plans, WithOverflowMapAPlanPastTheBudgetPlacesWhatFitsAndMapsTheRest) {
  auto uma = overflowing();
  std::vector<byte_ref> r;
  for (int i = 0; i < 3; ++i)
    r.push_back(client::erase(uma->allocate<std::byte>(8 * MiB)));
  const auto reply = uma->will_access(r, 0, access_mode::read, residency_policy::migrate);
  EXPECT_EQ(reply.to_device_bytes, 16 * MiB);
  EXPECT_EQ(reply.mapped_bytes, 8 * MiB);
  EXPECT_EQ(reply.overflow_bytes, 8 * MiB);
  EXPECT_EQ(reply.placements, 3u);
  const auto d = uma->residency().devices.at(0);
  EXPECT_EQ(d.resident, 16 * MiB);
  EXPECT_LE(d.resident, d.budget);
  EXPECT_EQ(uma->attributes(r[0]).last_prefetch_location, location::device(0));
  EXPECT_EQ(uma->attributes(r[1]).last_prefetch_location, location::device(0));
  expect_mapped(*uma, r[2]);
}

TEST_F(residency_plans, WithOverflowMapHeldExtentsFillingTheBudgetMapTheWholeNextPlan) {
  auto uma = overflowing();
  std::vector<byte_ref> r;
  for (int i = 0; i < 4; ++i)
    r.push_back(client::erase(uma->allocate<std::byte>(8 * MiB)));
  (void)uma->will_access({r[0], r[1]}, 0, access_mode::write, residency_policy::migrate);
  const auto reply = uma->will_access({r[2], r[3]}, 0, access_mode::read);  // automatic
  EXPECT_EQ(reply.to_device_bytes, 0u);
  EXPECT_EQ(reply.evictions, 0u);
  EXPECT_EQ(reply.mapped_bytes, 16 * MiB);
  EXPECT_EQ(reply.overflow_bytes, 16 * MiB);
  EXPECT_EQ(uma->residency().devices.at(0).resident, 16 * MiB);
  expect_mapped(*uma, r[2]);
  expect_mapped(*uma, r[3]);
}

TEST_F(residency_plans, WithOverflowMapALaterPlanAfterDoneWithPlacesTheMappedExtent) {
  auto uma = overflowing();
  std::vector<byte_ref> r;
  for (int i = 0; i < 3; ++i)
    r.push_back(client::erase(uma->allocate<std::byte>(8 * MiB)));
  (void)uma->will_access({r[0], r[1]}, 0, access_mode::write, residency_policy::migrate);
  EXPECT_EQ(uma->will_access({r[2]}, 0, access_mode::read).overflow_bytes, 8 * MiB);
  EXPECT_EQ(uma->done_with({r[0], r[1], r[2]}), 3u);
  const auto reply = uma->will_access({r[2]}, 0, access_mode::read, residency_policy::migrate);
  EXPECT_EQ(reply.overflow_bytes, 0u);
  EXPECT_EQ(reply.to_device_bytes, 8 * MiB);
  EXPECT_EQ(reply.to_host_bytes, 8 * MiB);  // r[0] or r[1], written, made room
  const auto a = uma->attributes(r[2]);     // the mapping undone, then moved
  EXPECT_EQ(a.preferred_location, std::nullopt);
  EXPECT_TRUE(a.accessed_by.empty());
  EXPECT_EQ(a.last_prefetch_location, location::device(0));
  EXPECT_EQ(uma->residency().devices.at(0).resident, 16 * MiB);
}

}  // namespace
}  // namespace uma
