// The node arbiter's options: `uma serve --arbiter-*` and `uma budgets` (tools/cli_options.cpp,
// tools/cli_arbiter_options.cpp). Each refusal is a usage error naming the option and value.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <uma/sys/error.hpp>
#include <uma/sys/host_backend.hpp>
#include "support/actor_fixture.hpp"
#include "tools/cli_arbiter_options.hpp"
#include "tools/cli_options.hpp"

namespace uma::cli {
namespace {

parse_result parse(std::vector<std::string_view> args) {
  return parse_arguments(args);
}

TEST(CliArbiterOptions, ServeTakesTotalsPoliciesAndADeadline) {
  const auto r = parse({"serve", "--arbiter-total", "0:40000000000", "--arbiter-total=1:4096",
                        "--arbiter-policy", "uid 1000/infer:0:1000000:10:2", "--arbiter-policy",
                        "cert a:b/train:1:0:0:1", "--arbiter-deadline", "2500"});
  ASSERT_TRUE(r.parsed) << r.error;
  const auto& o = *r.parsed;
  EXPECT_EQ(o.arbiter_totals, (std::map<int, std::uint64_t>{{0, 40000000000}, {1, 4096}}));
  ASSERT_EQ(o.arbiter_policies.size(), 2u);
  EXPECT_EQ(o.arbiter_policies[0].tenant, "uid 1000/infer");
  EXPECT_EQ(o.arbiter_policies[0].device, 0);
  EXPECT_EQ(o.arbiter_policies[0].policy.min_bytes, 1000000u);
  EXPECT_EQ(o.arbiter_policies[0].policy.priority, 10u);
  EXPECT_EQ(o.arbiter_policies[0].policy.weight, 2u);
  EXPECT_EQ(o.arbiter_policies[1].tenant, "cert a:b/train");  // split from the right
  EXPECT_EQ(o.arbiter_policies[1].device, 1);
  EXPECT_EQ(o.arbiter_deadline, std::chrono::milliseconds(2500));
}

TEST(CliArbiterOptions, ServeWithoutThemHasNoArbiter) {
  const auto r = parse({"serve"});
  ASSERT_TRUE(r.parsed) << r.error;
  EXPECT_TRUE(r.parsed->arbiter_totals.empty());
  EXPECT_EQ(r.parsed->arbiter_deadline, std::chrono::milliseconds(10000));
  EXPECT_EQ(make_node_arbiter(*r.parsed, {}), nullptr);
}

TEST(CliArbiterOptions, MalformedTotalsAreRefusedNamingTheValue) {
  const std::string form =
      "uma serve: --arbiter-total needs DEVICE:BYTES, DEVICE from 0 to 1023 and BYTES at least "
      "4096, not '";
  for (const std::string_view bad : {"0", "0:", ":4096", "0:4095", "-1:4096", "1024:4096",
                                     "0:4096x", "x:4096", "0:18446744073709551616"}) {
    const auto r = parse({"serve", "--arbiter-total", bad});
    EXPECT_FALSE(r.parsed) << bad;
    EXPECT_EQ(r.error, form + std::string(bad) + "'");
  }
  EXPECT_EQ(parse({"serve", "--arbiter-total", "0:4096", "--arbiter-total", "0:8192"}).error,
            "uma serve: --arbiter-total gives device 0 twice ('0:8192')");
  EXPECT_EQ(parse({"serve", "--arbiter-total", "0:4096", "1:4096"}).error,
            "uma serve: unexpected argument '1:4096'");  // one value an option
}

TEST(CliArbiterOptions, MalformedPoliciesAndDeadlinesAreRefusedNamingTheValue) {
  for (const std::string_view bad : {"uid 1/a:0:0:0", ":0:0:0:1", "uid 1/a:0:0:0:x",
                                     "uid 1/a:0:0:4294967296:1", "uid 1/a:1024:0:0:1"}) {
    const auto r = parse({"serve", "--arbiter-total", "0:4096", "--arbiter-policy", bad});
    EXPECT_FALSE(r.parsed) << bad;
    EXPECT_EQ(r.error.rfind("uma serve: --arbiter-policy needs TENANT:DEVICE:MIN_BYTES:PRIORITY:"
                            "WEIGHT",
                            0),
              0u)
        << r.error;
    EXPECT_NE(r.error.find("not '" + std::string(bad) + "'"), std::string::npos) << r.error;
  }
  for (const std::string_view bad : {"0", "3600001", "1s", ""}) {
    const auto r = parse({"serve", "--arbiter-total", "0:4096", "--arbiter-deadline", bad});
    EXPECT_FALSE(r.parsed) << bad;
    if (!bad.empty()) {
      EXPECT_EQ(r.error,
                "uma serve: --arbiter-deadline needs milliseconds from 1 to 3600000, "
                "not '" +
                    std::string(bad) + "'");
    }
  }
}

TEST(CliArbiterOptions, PoliciesAndTheDeadlineNeedATotal) {
  EXPECT_EQ(parse({"serve", "--arbiter-policy", "uid 1/a:0:0:0:1"}).error,
            "uma serve: --arbiter-policy goes with --arbiter-total (without it the node has no "
            "arbiter)");
  EXPECT_EQ(parse({"serve", "--arbiter-deadline", "100"}).error,
            "uma serve: --arbiter-deadline goes with --arbiter-total (without it the node has no "
            "arbiter)");
}

TEST(CliArbiterOptions, TotalsAreCheckedAgainstTheBackendsDevicesAndMemory) {
  const host_backend two(emulated_devices{.count = 2, .memory_bytes = 1u << 20});
  auto r = parse({"serve", "--arbiter-total", "1:1048576"});
  ASSERT_TRUE(r.parsed) << r.error;
  EXPECT_EQ(arbiter_totals_complaint(*r.parsed, two), "");
  r = parse({"serve", "--arbiter-total", "2:4096"});
  ASSERT_TRUE(r.parsed) << r.error;
  EXPECT_EQ(arbiter_totals_complaint(*r.parsed, two),
            "--arbiter-total 2:4096: the host backend has no device 2 (it has 2 device(s))");
  r = parse({"serve", "--arbiter-total", "0:1048577"});
  ASSERT_TRUE(r.parsed) << r.error;
  EXPECT_EQ(arbiter_totals_complaint(*r.parsed, two),
            "--arbiter-total 0:1048577: device 0 has 1048576 bytes of memory, fewer than that");
}

TEST(CliArbiterOptions, TheNodesArbiterHasTheTotalsAndPoliciesOrNamesThePolicyItRefuses) {
  auto r = parse(
      {"serve", "--arbiter-total", "0:1048576", "--arbiter-policy", "uid 1000/infer:0:4096:3:2"});
  ASSERT_TRUE(r.parsed) << r.error;
  const auto node = make_node_arbiter(*r.parsed, {});
  ASSERT_NE(node, nullptr);
  const auto report = node->report();
  ASSERT_EQ(report.devices.size(), 1u);
  EXPECT_EQ(report.devices[0].total_bytes, 1048576u);
  ASSERT_EQ(report.decisions.size(), 1u);  // the policy
  EXPECT_EQ(report.decisions[0].tenant, "uid 1000/infer");
  r = parse(
      {"serve", "--arbiter-total", "0:1048576", "--arbiter-policy", "uid 1000/infer:0:0:0:0"});
  ASSERT_TRUE(r.parsed) << r.error;
  UMA_EXPECT_ERROR(static_cast<void>(make_node_arbiter(*r.parsed, {})), errc::invalid_argument,
                   "--arbiter-policy 'uid 1000/infer:0:0:0:0': set_policy: tenant");
}

TEST(CliArbiterOptions, BudgetsNeedsConnectAndTakesTheOperatorsSettings) {
  EXPECT_EQ(parse({"budgets"}).error,
            "uma budgets: --connect unix:PATH or HOST:PORT is required (the address of a `uma "
            "serve`)");
  const auto r = parse({"budgets", "--connect", "unix:/run/uma.sock.operator", "--json",
                        "--set-total", "0:8192", "--set-policy", "uid 1000/infer:0:4096:1:7"});
  ASSERT_TRUE(r.parsed) << r.error;
  EXPECT_EQ(r.parsed->what, command::budgets);
  EXPECT_EQ(r.parsed->format, output_format::json);
  EXPECT_EQ(r.parsed->set_total, (std::pair<int, std::uint64_t>{0, 8192}));
  ASSERT_TRUE(r.parsed->set_policy);
  EXPECT_EQ(to_string(*r.parsed->set_policy), "uid 1000/infer:0:4096:1:7");
  EXPECT_EQ(parse({"budgets", "--connect", "h:1", "--set-total", "0:1"}).error,
            "uma budgets: --set-total needs DEVICE:BYTES, DEVICE from 0 to 1023 and BYTES at "
            "least 4096, not '0:1'");
  EXPECT_EQ(parse({"budgets", "--connect", "h:1", "--set-policy", "infer"})
                .error.rfind(
                    "uma budgets: --set-policy needs TENANT:DEVICE:MIN_BYTES:PRIORITY:WEIGHT", 0),
            0u);
  EXPECT_EQ(parse({"budgets", "--connect", "h:1", "--caf.scheduler.max-threads=2"}).error,
            "uma budgets: unknown option '--caf.scheduler.max-threads'");
  EXPECT_EQ(parse({"budgets", "--connect", "h:1", "--backend", "host"}).error,
            "uma budgets: unknown option '--backend'");
}

TEST(CliArbiterOptions, BudgetsHasAUsageText) {
  const auto text = usage(command::budgets);
  EXPECT_EQ(text.rfind("usage: uma budgets --connect unix:PATH|HOST:PORT", 0), 0u) << text;
  EXPECT_NE(text.find("--set-policy TENANT:DEVICE:MIN:PRIORITY:WEIGHT"), std::string::npos);
  EXPECT_NE(usage(command::help).find("budgets"), std::string::npos);
  EXPECT_NE(usage(command::serve).find("--arbiter-total DEVICE:BYTES"), std::string::npos);
}

}  // namespace
}  // namespace uma::cli
