// The gateway's per-tenant lease totals (actors/remote/detail/tenant_totals.hpp) and what reads
// them: admission against the tenant quota and the stats' lease counts
// (actors/remote/detail/remote_sessions). Issue 35, finding 4: both summed every lease of every
// session on each call; they read totals kept as leases come and go, so a request visits no lease
// whatever the table holds.

#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <string>

#include <caf/event_based_actor.hpp>

#include <uma/actors/remote/detail/remote_sessions.hpp>
#include <uma/actors/remote/detail/tenant_totals.hpp>

#include "support/actor_fixture.hpp"

namespace uma {
namespace {

caf::behavior idle_peer(int) {
  return {[](int) {}};
}

class tenant_totals_test : public test::actor_fixture {
 protected:
  void TearDown() override { caf::anon_send_exit(peer_, caf::exit_reason::user_shutdown); }

  /// Opens a session of `tenant` (id `sid`) in `sessions_`.
  detail::session& open(std::uint64_t sid, const std::string& tenant) {
    return sessions_.try_emplace(sid, peer_, session_key{sid, 1, 2}, tenant, tenants_.of(tenant))
        .first->second;
  }

  /// Leases `n` regions of `bytes` to `s`, each charged `bytes`.
  void lease(detail::session& s, int n, std::size_t bytes) {
    for (int i = 0; i < n; ++i)
      static_cast<void>(s.leases.add(uma_->allocate<std::byte>(bytes), bytes));
  }

  /// Leases visited by every book's walks so far.
  std::uint64_t visited() const {
    std::uint64_t n = 0;
    for (const auto& [sid, s] : sessions_)
      n += s.leases.leases_visited();
    return n;
  }

  caf::actor peer_ = sys_.spawn(idle_peer, 0);
  detail::tenant_totals tenants_;
  std::map<std::uint64_t, detail::session> sessions_;
};

TEST_F(tenant_totals_test, AdmissionReadsTheTenantsTotalWithoutVisitingALease) {
  gateway_config cfg;
  cfg.tenant_quota_bytes = 1 << 20;
  cfg.max_leases_per_session = 1 << 20;
  auto& mine = open(1, "alice");
  auto& mine_too = open(2, "alice");
  auto& theirs = open(3, "mallory");
  lease(mine, 100, 4096);
  lease(mine_too, 50, 4096);
  lease(theirs, 4096, 64);  // another tenant's table grows: alice's admission must not see it
  const auto before = visited();
  const auto refused = detail::admit(
      mine_too, remote_allocate_request{1 << 20, 0, attach_flag::global, "x"}, cfg, 0);
  ASSERT_TRUE(refused.has_value());
  EXPECT_NE(
      refused->message.find("the tenant (alice) holds " + std::to_string(150 * 4096) + " bytes"),
      std::string::npos)
      << refused->message;
  EXPECT_FALSE(
      detail::admit(mine, remote_allocate_request{4096, 0, attach_flag::global, "x"}, cfg, 0));
  EXPECT_EQ(visited(), before);
}

TEST_F(tenant_totals_test, StatsCountEveryLeaseWithoutVisitingOne) {
  lease(open(1, "alice"), 3, 4096);
  lease(open(2, "mallory"), 4096, 64);
  const auto before = visited();
  remote_stats out;
  detail::count_leases(out, sessions_, tenants_.all());
  EXPECT_EQ(out.sessions, 2u);
  EXPECT_EQ(out.leases, 3u + 4096u);
  EXPECT_EQ(out.leased_bytes, 3u * 4096u + 4096u * 64u);
  EXPECT_EQ(visited(), before);
}

TEST_F(tenant_totals_test, ATenantsTotalsGoWithItsLastSession) {
  lease(open(1, "alice"), 2, 4096);
  lease(open(2, "alice"), 1, 4096);
  sessions_.erase(1);
  tenants_.forget_unused("alice");
  EXPECT_EQ(tenants_.tenants(), 1u);  // session 2 still counts in them
  EXPECT_EQ(sessions_.at(2).tenant_leases->charged(), 4096u);
  EXPECT_EQ(tenants_.all().held_bytes(), 4096u);
  sessions_.erase(2);
  tenants_.forget_unused("alice");
  EXPECT_EQ(tenants_.tenants(), 0u);
  EXPECT_EQ(tenants_.all().leases(), 0u);
  EXPECT_EQ(tenants_.all().charged(), 0u);
}

// After a restart the old incarnation's leases are inert: the tenant may allocate again what they
// held, and the stats count their leases but not their bytes.
TEST_F(tenant_totals_test, InertLeasesNeitherChargeNorHoldAfterARestart) {
  gateway_config cfg;
  cfg.tenant_quota_bytes = 3 * 4096;
  auto& mine = open(1, "alice");
  lease(mine, 3, 4096);
  EXPECT_TRUE(
      detail::admit(mine, remote_allocate_request{4096, 0, attach_flag::global, ""}, cfg, 0));
  (void)uma_->stop();
  EXPECT_FALSE(
      detail::admit(mine, remote_allocate_request{4096, 0, attach_flag::global, ""}, cfg, 0));
  remote_stats out;
  detail::count_leases(out, sessions_, tenants_.all());
  EXPECT_EQ(out.leases, 3u);
  EXPECT_EQ(out.leased_bytes, 0u);
}

}  // namespace
}  // namespace uma
