// The arbiter's Prometheus families (actors/remote/arbiter/arbiter.hpp, docs/distributed.md "The
// report, the ledger, metrics"): per device its total and held bytes, per member its grant,
// held, resident and wanted bytes with the device, member, tenant and state labels.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <uma/actors/remote/arbiter/arbiter.hpp>

namespace uma {
namespace {

constexpr std::uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

struct dropped final : arbiter_sink {
  void send(const arbiter_grant&) override {}
};

TEST(ArbiterMetrics, TheTextCarriesEachDeviceAndEachMembersFigures) {
  arbiter arb(arbiter_config{.totals = {{0, GiB}}});
  const auto sink = std::make_shared<dropped>();
  const auto a = arb.join("uid 7", "infer", {arbiter_claim{0, 0, 256 * MiB, 0, 1, false}}, sink);
  const auto text = arb.prometheus_text();
  EXPECT_NE(text.find("uma_arbiter_total_bytes{device=\"0\"} " + std::to_string(GiB)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("uma_arbiter_held_bytes{device=\"0\"} " + std::to_string(256 * MiB)),
            std::string::npos)
      << text;
  const auto labels = "{device=\"0\",member=\"" + std::to_string(a) +
                      "\",tenant=\"uid 7/infer\",state=\"active\"} ";
  EXPECT_NE(text.find("uma_arbiter_granted_bytes" + labels + std::to_string(256 * MiB)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("uma_arbiter_wanted_bytes" + labels + std::to_string(256 * MiB)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("uma_arbiter_members 1\n"), std::string::npos) << text;
  arb.leave(a, "test");
  const auto after = arb.prometheus_text();
  EXPECT_EQ(after.find("uma_arbiter_granted_bytes{"), std::string::npos) << after;
  EXPECT_NE(after.find("uma_arbiter_held_bytes{device=\"0\"} 0\n"), std::string::npos) << after;
}

}  // namespace
}  // namespace uma
