// Residency over the remote interface (issue 15, docs/residency.md "Tenants"), in one process:
// a session's plans name its leased regions and count for its tenant (its node), which the
// gateway holds under a device budget of its own; errors cross unchanged and change nothing.

#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/remote/remote_gateway.hpp>
#include "support/actor_fixture.hpp"
#include "support/gateway_request.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;
constexpr std::uint64_t MiB = std::uint64_t{1} << 20;

caf::behavior idle_peer(int) {
  return {[](int) {}};
}

class remote_residency : public test::actor_fixture {
 protected:
  void SetUp() override {
    supervisor_config cfg;
    cfg.allocator = one_device_config();
    sup_ = spawn_supervisor(sys_, std::move(cfg));
    gateway_config gw;
    gw.tenant_device_budget_bytes = 8 * MiB;
    gw_ = spawn_remote_gateway(sys_, sup_, std::move(gw));
    for (auto& p : peers_)
      p = sys_.spawn(idle_peer, 0);
    for (int i = 0; i < 2; ++i)
      sessions_[i] = ask<session_key>(open_session_atom_v, peers_[i]);
  }
  void TearDown() override {
    for (auto& p : peers_)
      caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(gw_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(sup_, caf::exit_reason::user_shutdown);
  }

  template <class R, class... Ts>
  R ask(Ts&&... xs) {
    return test::request_gateway<R>(sys_, gw_, std::forward<Ts>(xs)...);
  }
  region_handle allocate(int session) {
    return ask<region_handle>(allocate_atom_v, sessions_[session],
                              remote_allocate_request{4 * MiB, 0, attach_flag::global, "r"});
  }
  residency_result plan(int session, std::vector<region_handle> regions, int device = 0,
                        completion when = completion::enqueued) {
    return ask<residency_result>(will_access_atom_v, sessions_[session],
                                 remote_access_plan{std::move(regions), device, access_mode::write,
                                                    residency_policy::migrate, when});
  }
  std::uint64_t done(int session, std::vector<region_handle> regions) {
    return ask<std::uint64_t>(done_with_atom_v, sessions_[session], std::move(regions));
  }
  residency_report local_report() {
    client local(sys_, sup_);
    return local.residency();
  }

  allocator_supervisor_actor sup_;
  remote_allocator_actor gw_;
  caf::actor peers_[2];
  session_key sessions_[2];
};

TEST_F(remote_residency, ASessionsPlansCountForItsNodeAndStayWithinTheTenantsBudget) {
  const auto a = allocate(0), b = allocate(0), c = allocate(1);
  EXPECT_EQ(plan(0, {a}).to_device_bytes, 4 * MiB);
  EXPECT_EQ(plan(0, {b}).to_device_bytes, 4 * MiB);
  EXPECT_EQ(done(0, {a, b}), 2u);
  // The second session is of the same node (one process): the same tenant. Its plan makes room
  // among the tenant's regions: a, the least recently used, goes back.
  const auto third = plan(1, {c});
  EXPECT_EQ(third.to_host_bytes, 4 * MiB);
  const auto report = local_report();
  ASSERT_EQ(report.tenants.size(), 1u);
  EXPECT_EQ(report.tenants[0].tenant.rfind("node ", 0), 0u) << report.tenants[0].tenant;
  EXPECT_EQ(report.tenants[0].devices.at(0).budget, 8 * MiB);
  EXPECT_EQ(report.tenants[0].devices.at(0).resident, 8 * MiB);
  EXPECT_EQ(report.tenants[0].devices.at(0).held, 4 * MiB);
  EXPECT_EQ(report.devices.at(0).resident, 8 * MiB);
}

TEST_F(remote_residency, APlanPastTheTenantsBudgetIsRefusedOverTheWireAndChangesNothing) {
  const auto a = allocate(0), b = allocate(0), c = allocate(0);
  (void)plan(0, {a, b});  // held: the whole budget
  UMA_EXPECT_ERROR(plan(0, {c}), errc::quota_exceeded, "tenant 'node ");
  EXPECT_EQ(local_report().devices.at(0).resident, 8 * MiB);
  UMA_EXPECT_ERROR(plan(0, {c}, 3), errc::invalid_argument, "device 3");
  UMA_EXPECT_ERROR(plan(0, {c}, 0, static_cast<completion>(9)), errc::invalid_argument,
                   "will_access");
  UMA_EXPECT_ERROR(plan(0, {}), errc::invalid_argument, "no regions");
  EXPECT_EQ(local_report().devices.at(0).resident, 8 * MiB);
}

TEST_F(remote_residency, ASessionCannotPlanAnotherSessionsLeaseAndDeadDataMovesNothingBack) {
  const auto mine = allocate(0);
  UMA_EXPECT_ERRC(plan(1, {mine}), errc::invalid_argument);
  UMA_EXPECT_ERRC(done(1, {mine}), errc::invalid_argument);
  EXPECT_EQ(local_report().devices.at(0).resident, 0u);
  (void)plan(0, {mine});
  UMA_EXPECT_ERROR(
      ask<residency_result>(dead_atom_v, sessions_[0], std::vector<region_handle>{mine}),
      errc::invalid_argument, "held");
  EXPECT_EQ(done(0, {mine}), 1u);
  const auto dead =
      ask<residency_result>(dead_atom_v, sessions_[0], std::vector<region_handle>{mine});
  EXPECT_EQ(dead.discarded_bytes, 4 * MiB);
  EXPECT_EQ(dead.to_host_bytes, 0u);
  EXPECT_EQ(local_report().devices.at(0).resident, 0u);
}

}  // namespace
}  // namespace uma
