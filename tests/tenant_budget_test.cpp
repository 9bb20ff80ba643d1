// Tenant budgets of the residency account (issue 15, docs/residency.md "Tenants"): each tenant's
// bytes on a device held under a budget of their own, inside the device's; a tenant's plan makes
// room among its own regions first; refusals change nothing.

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/metrics/prometheus_text.hpp>
#include <uma/memory/residency_account.hpp>
#include <uma/sys/error.hpp>
#include "support/actor_fixture.hpp"

namespace uma {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

class tenants : public ::testing::Test {
 protected:
  residency_plan plan(std::uint64_t id, const std::string& tenant, std::size_t bytes = 4 * MiB,
                      access_mode mode = access_mode::write) {
    const planned_region r{id, bytes, residency_policy::migrate, "", tenant};
    return account_.will_access({&r, 1}, 0, mode);
  }
  void done(std::uint64_t id) { account_.done_with(std::vector<std::uint64_t>{id}); }
  std::vector<std::uint64_t> evicted(const residency_plan& p) {
    std::vector<std::uint64_t> out;
    for (const auto& m : p.evictions)
      out.push_back(m.region);
    return out;
  }

  residency_account account_{{64 * MiB}};
};

TEST_F(tenants, ATenantsPlanEvictsItsOwnLeastRecentlyUsedRegionsAndLeavesOthersAlone) {
  account_.set_tenant_budget("a", 0, 8 * MiB);
  (void)plan(3, "b");  // the oldest region of all, another tenant's
  done(3);
  (void)plan(1, "a");
  done(1);
  (void)plan(2, "a");
  done(2);
  const auto p = plan(4, "a");
  EXPECT_EQ(evicted(p), std::vector<std::uint64_t>{1});
  EXPECT_EQ(account_.tenant("a", 0).resident, 8 * MiB);
  EXPECT_EQ(account_.tenant("a", 0).peak, 8 * MiB);
  EXPECT_EQ(account_.tenant("a", 0).held, 4 * MiB);
  EXPECT_EQ(account_.tenant("b", 0).resident, 4 * MiB);
  EXPECT_EQ(account_.device(0).resident, 12 * MiB);
  EXPECT_EQ(account_.tenants(), (std::vector<std::string>{"a", "b"}));
}

TEST_F(tenants, TheDeviceBudgetStillEvictsAcrossTenantsAfterATenantsOwn) {
  account_.set_budget(0, 12 * MiB);
  account_.set_tenant_budget("a", 0, 8 * MiB);
  (void)plan(3, "b");
  done(3);
  (void)plan(1, "a");
  done(1);
  (void)plan(2, "a");
  done(2);
  // 4 MiB more for "a": its own region 1 goes (the tenant's budget), not b's older region 3;
  // the device stays at 12 of 12. Then 8 MiB for "c": the device needs 8 more, and evicts in
  // least-recently-used order across tenants: b's 3, then a's 2.
  EXPECT_EQ(evicted(plan(4, "a")), std::vector<std::uint64_t>{1});
  done(4);
  EXPECT_EQ(evicted(plan(5, "c", 8 * MiB)), (std::vector<std::uint64_t>{3, 2}));
  EXPECT_EQ(account_.device(0).resident, 12 * MiB);
  EXPECT_EQ(account_.tenant("a", 0).resident, 4 * MiB);
  EXPECT_EQ(account_.tenant("b", 0).resident, 0u);
  EXPECT_EQ(account_.tenant("c", 0).resident, 8 * MiB);
}

TEST_F(tenants, APlanPastItsTenantsBudgetIsRefusedNamingTheTenantAndChangesNothing) {
  account_.set_tenant_budget("a", 0, 8 * MiB);
  (void)plan(1, "a");
  (void)plan(2, "a");  // both held
  try {
    (void)plan(3, "a");
    ADD_FAILURE() << "a plan past the tenant's budget was accepted";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::quota_exceeded);
    EXPECT_NE(std::string(e.what()).find("tenant 'a'"), std::string::npos) << e.what();
  }
  UMA_EXPECT_ERRC(plan(4, "a", 12 * MiB), errc::quota_exceeded);
  EXPECT_EQ(account_.tenant("a", 0).resident, 8 * MiB);
  EXPECT_EQ(account_.regions(), 2u);
  // Another tenant, and no tenant at all, are not bound by a's budget.
  (void)plan(5, "b", 16 * MiB);
  (void)plan(6, "", 16 * MiB);
  EXPECT_EQ(account_.device(0).resident, 40 * MiB);
}

TEST_F(tenants, ARegionKeepsTheTenantOfItsFirstPlan) {
  (void)plan(1, "a");
  done(1);
  UMA_EXPECT_ERRC(plan(1, "b"), errc::invalid_argument);
  UMA_EXPECT_ERRC(plan(1, ""), errc::invalid_argument);
  EXPECT_EQ(account_.tenant("a", 0).resident, 4 * MiB);
  EXPECT_EQ(account_.tenant("a", 0).held, 0u);
  EXPECT_EQ(account_.tenant("b", 0).resident, 0u);
}

TEST_F(tenants, BadNamesBudgetsAndDevicesAreRefusedAndChangeNothing) {
  UMA_EXPECT_ERRC(account_.set_tenant_budget("", 0, MiB), errc::invalid_argument);
  UMA_EXPECT_ERRC(account_.set_tenant_budget(std::string(129, 't'), 0, MiB),
                  errc::invalid_argument);
  UMA_EXPECT_ERRC(account_.set_tenant_budget("a\nb", 0, MiB), errc::invalid_argument);
  UMA_EXPECT_ERRC(account_.set_tenant_budget("a", 0, 65 * MiB), errc::invalid_argument);
  UMA_EXPECT_ERRC(account_.set_tenant_budget("a", 1, MiB), errc::invalid_argument);
  UMA_EXPECT_ERRC(plan(1, std::string(200, 'x')), errc::invalid_argument);
  EXPECT_TRUE(account_.tenants().empty());
  EXPECT_EQ(account_.regions(), 0u);
  account_.set_tenant_budget(std::string(128, 't'), 0, 64 * MiB);  // the longest name, all memory
  EXPECT_EQ(account_.tenant(std::string(128, 't'), 0).budget, 64 * MiB);
}

TEST_F(tenants, ABudgetOfZeroRemovesItAndLeavingRegionsLeaveTheirTenantsAccount) {
  account_.set_tenant_budget("a", 0, 4 * MiB);
  (void)plan(1, "a");
  done(1);
  account_.set_tenant_budget("a", 0, 0);
  EXPECT_TRUE(evicted(plan(2, "a")).empty());  // no budget: nothing evicted
  done(2);
  EXPECT_EQ(account_.tenant("a", 0).resident, 8 * MiB);
  (void)account_.dead(std::vector<std::uint64_t>{1});
  EXPECT_EQ(account_.tenant("a", 0).resident, 4 * MiB);
  account_.forget(2);
  EXPECT_EQ(account_.tenant("a", 0).resident, 0u);
  EXPECT_EQ(account_.tenant("a", 0).peak, 8 * MiB);
  (void)plan(3, "a");
  account_.clear();
  EXPECT_EQ(account_.tenant("a", 0).resident, 0u);
  EXPECT_EQ(account_.device(0).resident, 0u);
}

TEST_F(tenants, RandomPlansKeepEveryTenantWithinItsBudgetAndTheSumsAgree) {
  account_.set_budget(0, 48 * MiB);
  const std::vector<std::string> names{"a", "b", "c", ""};
  const std::map<std::string, std::size_t> budget{{"a", 12 * MiB}, {"b", 20 * MiB}, {"c", 8 * MiB}};
  for (const auto& [name, bytes] : budget)
    account_.set_tenant_budget(name, 0, bytes);
  std::mt19937 rng(15);
  std::map<std::uint64_t, std::string> owner;
  for (int step = 0; step < 3000; ++step) {
    const std::uint64_t id = 1 + rng() % 40;
    if (!owner.contains(id))
      owner[id] = names[rng() % names.size()];
    const std::size_t bytes = (1 + id % 4) * MiB;
    try {
      (void)plan(id, owner[id], bytes, rng() % 2 == 0 ? access_mode::read : access_mode::write);
      done(id);
    } catch (const error& e) {
      ASSERT_EQ(e.code(), errc::quota_exceeded) << e.what();
    }
    std::size_t sum = 0;
    for (const auto& [name, bytes] : budget) {
      const auto t = account_.tenant(name, 0);
      ASSERT_LE(t.resident, bytes) << name << " at step " << step;
      sum += t.resident;
    }
    ASSERT_LE(account_.device(0).resident, 48 * MiB);
    ASSERT_GE(account_.device(0).resident, sum);  // the rest is the tenant-less regions'
  }
  EXPECT_GT(account_.tenant("b", 0).peak, 0u);
}

// -- through the allocator (host backend, a 64 MiB residency device) ---------------------------

class tenant_plans : public test::actor_fixture {
 protected:
  residency_result plan(client& c, const byte_ref& ref, const std::string& tenant) {
    access_plan_request r;
    r.refs = {ref};
    r.mode = access_mode::write;
    r.policy = residency_policy::migrate;
    r.tenant = tenant;
    return c.will_access(std::move(r));
  }
};

TEST_F(tenant_plans, ASessionsPlansStayWithinItsBudgetAndTheReportShowsEachTenant) {
  auto uma = make_client(one_device_config());
  EXPECT_EQ(uma->tenant_budget("session 1", 0, 8 * MiB), 8 * MiB);
  std::vector<byte_ref> mine, theirs;
  for (int i = 0; i < 3; ++i) {
    mine.push_back(client::erase(uma->allocate<std::byte>(4 * MiB)));
    theirs.push_back(client::erase(uma->allocate<std::byte>(4 * MiB)));
  }
  for (const auto& r : theirs)
    (void)plan(*uma, r, "session 2");
  (void)uma->done_with(theirs);
  (void)plan(*uma, mine[0], "session 1");
  (void)plan(*uma, mine[1], "session 1");
  (void)uma->done_with({mine[0], mine[1]});
  const auto third = plan(*uma, mine[2], "session 1");
  EXPECT_EQ(third.to_host_bytes, 4 * MiB);  // its own first region, not session 2's older ones
  UMA_EXPECT_ERROR(plan(*uma, theirs[0], "session 1"), errc::invalid_argument, "tenant");
  const auto report = uma->residency();
  ASSERT_EQ(report.tenants.size(), 2u);
  EXPECT_EQ(report.tenants[0].tenant, "session 1");
  EXPECT_EQ(report.tenants[0].devices.at(0).budget, 8 * MiB);
  EXPECT_EQ(report.tenants[0].devices.at(0).resident, 8 * MiB);
  EXPECT_EQ(report.tenants[0].devices.at(0).held, 4 * MiB);
  EXPECT_EQ(report.tenants[1].devices.at(0).resident, 12 * MiB);
  metrics_snapshot m{.allocator = uma->stats(), .residency = report};
  const auto text = to_prometheus(m);
  EXPECT_NE(text.find("uma_residency_tenant_resident_bytes{backend=\"host\",generation=\"1\","
                      "tenant=\"session 1\",device=\"0\"} 8388608\n"),
            std::string::npos)
      << text;
}

TEST_F(tenant_plans, BadTenantBudgetsAreRefusedNamingWhatIsWrongBeforeAnythingChanges) {
  auto uma = make_client(one_device_config());
  UMA_EXPECT_ERROR(uma->tenant_budget("", 0, MiB), errc::invalid_argument, "tenant name");
  UMA_EXPECT_ERROR(uma->tenant_budget("t", 3, MiB), errc::invalid_argument, "device 3");
  UMA_EXPECT_ERROR(uma->tenant_budget("t", 0, 65 * MiB), errc::invalid_argument, "67108864");
  EXPECT_TRUE(uma->residency().tenants.empty());
  auto bad = one_device_config();
  bad.residency.tenant_budgets = {{"t", 0, 128 * MiB}};
  UMA_EXPECT_ERROR((void)make_client(bad), errc::invalid_argument, "tenant 't'");
}

TEST_F(tenant_plans, ATenantBudgetSetThroughTheSupervisorOutlivesARestart) {
  supervisor_config cfg;
  cfg.allocator = one_device_config();
  client supervised(sys_, cfg);
  supervised.set_max_block_bytes(0);
  EXPECT_EQ(supervised.tenant_budget("kept", 0, 8 * MiB), 8 * MiB);
  EXPECT_EQ(supervised.tenant_budget("removed", 0, 4 * MiB), 4 * MiB);
  EXPECT_EQ(supervised.tenant_budget("removed", 0, 0), 0u);
  caf::scoped_actor self{sys_};
  self->request(*supervised.supervisor(), std::chrono::seconds(20), restart_atom_v)
      .receive([](std::uint64_t generation) { EXPECT_EQ(generation, 2u); },
               [&](caf::error& e) { FAIL() << sys_.render(e); });
  const auto report = supervised.residency();
  ASSERT_EQ(report.tenants.size(), 1u);
  EXPECT_EQ(report.tenants[0].tenant, "kept");
  EXPECT_EQ(report.tenants[0].devices.at(0).budget, 8 * MiB);
}

}  // namespace
}  // namespace uma
