// The settings a supervisor owns (actors/allocator_settings.hpp): a quota or budget set through
// the supervisor is the supervisor's value first, then the current incarnation's, and every
// later incarnation starts from it; a value the backend would refuse changes neither.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/client.hpp>
#include <uma/sys/host_backend.hpp>
#include "support/actor_fixture.hpp"

namespace uma {
namespace {

constexpr std::uint64_t MiB = std::uint64_t{1} << 20;

class supervisor_settings : public test::actor_fixture {
 protected:
  /// A supervised client over one emulated device of 64 MiB.
  client& start() {
    supervisor_config cfg;
    cfg.allocator = one_device_config();
    sup_ = spawn_supervisor(sys_, std::move(cfg));
    auto& c = client_.emplace(sys_, sup_);
    c.set_max_block_bytes(0);  // the message path
    return c;
  }

  /// Replaces the incarnation on purpose; the new generation's number.
  std::uint64_t restart() {
    caf::scoped_actor self{sys_};
    std::uint64_t out = 0;
    self->request(sup_, std::chrono::seconds(20), restart_atom_v)
        .receive([&](std::uint64_t generation) { out = generation; },
                 [&](caf::error& e) { ADD_FAILURE() << sys_.render(e); });
    return out;
  }

  /// `tenant`'s budget on device 0 in the residency report; 0 when it has none.
  static std::uint64_t tenant_budget_of(client& c, const std::string& tenant) {
    for (const auto& t : c.residency().tenants)
      if (t.tenant == tenant)
        return t.devices.at(0).budget;
    return 0;
  }

  allocator_supervisor_actor sup_;
  std::optional<client> client_;
};

TEST_F(supervisor_settings, AQuotaAndBudgetsSetThroughTheSupervisorOutliveARestart) {
  auto& c = start();
  const auto default_budget = c.device_budget(0);
  ASSERT_NE(default_budget, 16 * MiB);
  EXPECT_EQ(c.quota(32 * MiB), 32 * MiB);
  EXPECT_EQ(c.device_budget(0, 16 * MiB), 16 * MiB);
  EXPECT_EQ(c.tenant_budget("kept", 0, 8 * MiB), 8 * MiB);
  ASSERT_EQ(restart(), 2u);
  EXPECT_EQ(c.quota(), 32 * MiB);
  EXPECT_EQ(c.device_budget(0), 16 * MiB);
  EXPECT_EQ(tenant_budget_of(c, "kept"), 8 * MiB);
  // A later change replaces the value the next incarnation starts from.
  EXPECT_EQ(c.device_budget(0, 24 * MiB), 24 * MiB);
  ASSERT_EQ(restart(), 3u);
  EXPECT_EQ(c.device_budget(0), 24 * MiB);
  c.stop();
}

TEST_F(supervisor_settings, ABadValueSentToTheSupervisorChangesNothing) {
  auto& c = start();
  EXPECT_EQ(c.quota(32 * MiB), 32 * MiB);
  auto held = c.allocate<float>(1024);  // the quota may not go below the bytes held
  UMA_EXPECT_ERROR(c.quota(1), errc::invalid_argument, "below the bytes held");
  EXPECT_EQ(c.quota(), 32 * MiB);
  EXPECT_EQ(c.device_budget(0, 16 * MiB), 16 * MiB);
  EXPECT_EQ(c.tenant_budget("t", 0, 8 * MiB), 8 * MiB);
  // Each refused with an error naming what was wrong, before the incarnation hears of it.
  UMA_EXPECT_ERROR(c.device_budget(0, 65 * MiB), errc::invalid_argument, "68157440");
  UMA_EXPECT_ERROR(c.device_budget(3, MiB), errc::invalid_argument, "device 3");
  UMA_EXPECT_ERROR(c.tenant_budget("t", 0, 65 * MiB), errc::invalid_argument, "68157440");
  UMA_EXPECT_ERROR(c.tenant_budget("t", 3, MiB), errc::invalid_argument, "device 3");
  UMA_EXPECT_ERROR(c.tenant_budget("t", 3, 0), errc::invalid_argument, "device 3");
  // The incarnation kept its values...
  EXPECT_EQ(c.device_budget(0), 16 * MiB);
  EXPECT_EQ(tenant_budget_of(c, "t"), 8 * MiB);
  // ...and so did the supervisor: the next incarnation starts from them.
  held.reset();
  ASSERT_EQ(restart(), 2u);
  EXPECT_EQ(c.quota(), 32 * MiB);
  EXPECT_EQ(c.device_budget(0), 16 * MiB);
  EXPECT_EQ(tenant_budget_of(c, "t"), 8 * MiB);
  const auto s = query_supervision(sys_, sup_);
  EXPECT_EQ(s.restarts, 0u);  // no failure: the bad values never reached an incarnation
  c.stop();
}

}  // namespace
}  // namespace uma
