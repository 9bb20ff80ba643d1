// `uma budgets --connect` and `uma snapshot --connect` against a real `uma serve
// --arbiter-total` (a child process on the sockets of a private directory), and `uma serve`'s
// refusals of arbiter options the backend cannot meet. Children are bounded (`--for`) and always
// killed and reaped (test::child_process).

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <boost/json/parse.hpp>

#include <uma/actors/remote/arbiter/arbiter_member.hpp>
#include "support/child_process.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;
using test::child_process;

/// Where the build put `uma`, unless UMA_TEST_CLI says otherwise (a bundle on the GPU machine).
std::string cli_path() {
  const char* v = std::getenv("UMA_TEST_CLI");
  return v != nullptr && *v != '\0' ? v : UMA_CLI_PATH;
}

/// The emulated device's memory and the arbiter's total on it.
constexpr std::uint64_t device_memory = 8ull << 30;
constexpr std::uint64_t total = 4ull << 30;

class arbiter_cli : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/uma-arbiter-cli-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    ASSERT_NE(made, nullptr);
    dir_ = made;
  }

  void TearDown() override {
    server_.reset();
    if (!dir_.empty())
      std::filesystem::remove_all(dir_);
  }

  /// `uma serve` on the host backend (one emulated device of `device_memory`) with `extra`
  /// arguments, on this test's sockets; returns once both are announced.
  void serve(std::vector<std::string> extra) {
    std::vector<std::string> argv{cli_path(),       "serve",
                                  "--socket",       socket(),
                                  "--for",          "60",
                                  "--backend",      "host",
                                  "--host-devices", "1:" + std::to_string(device_memory)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    server_ = std::make_unique<child_process>(argv);
    const auto line = server_->read_line(20s);
    ASSERT_TRUE(line) << "uma serve printed no line";
    ASSERT_EQ(line->rfind("uma serve: listening on " + endpoint() + " (backend ", 0), 0u) << *line;
    const auto op = server_->read_line(20s);
    ASSERT_TRUE(op);
    ASSERT_EQ(*op, "uma serve: operator socket " + op_endpoint());
  }

  /// Runs `uma ARGS...` to completion (bounded): its exit status (-1 when it did not exit) and
  /// what it wrote to stdout and stderr.
  static std::pair<int, std::string> run_cli(std::vector<std::string> args) {
    args.insert(args.begin(), {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", cli_path()});
    child_process cli(args);
    auto out = cli.read_all(20s);
    const auto status = cli.wait(20s);
    return {status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1, out};
  }

  [[nodiscard]] std::string socket() const { return dir_ + "/uma.sock"; }
  [[nodiscard]] std::string endpoint() const { return "unix:" + socket(); }
  [[nodiscard]] std::string op_endpoint() const { return endpoint() + ".operator"; }
  [[nodiscard]] static std::string tenant(const std::string& name) {
    return "uid " + std::to_string(::getuid()) + "/" + name;
  }

  /// `uma snapshot --connect` of the operator's socket written to files of this test's
  /// directory; ASSERTs that it exited 0. Returns the JSON's text and the page.
  std::pair<std::string, std::string> snapshot() {
    const auto json = dir_ + "/snap.json";
    const auto html = dir_ + "/snap.html";
    const auto [code, out] =
        run_cli({"snapshot", "--connect", op_endpoint(), "--json", json, "--html", html});
    EXPECT_EQ(code, 0) << out;
    return {read_text(json), read_text(html)};
  }

  [[nodiscard]] static std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  /// A member of this test's `name` on device 0 that wants 1 MiB, once it was granted.
  [[nodiscard]] std::unique_ptr<arbiter_member> join(const std::string& name) {
    auto member = std::make_unique<arbiter_member>(
        endpoint(), name, std::vector<arbiter_claim>{{.device = 0, .wanted_bytes = 1 << 20}},
        [](const arbiter_grant&) { return std::uint64_t{0}; },
        remote_client_options{.timeout = 10s});
    EXPECT_TRUE(member->wait_for_budget(
        0, [](std::uint64_t b) { return b == 1 << 20; }, 10s));
    return member;
  }

  std::string dir_;
  std::unique_ptr<child_process> server_;
};

TEST_F(arbiter_cli, BudgetsPrintsEachDevicesTotalAsTextAndJson) {
  serve({"--arbiter-total", "0:" + std::to_string(total)});
  auto [code, out] = run_cli({"budgets", "--connect", endpoint()});
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(out.rfind("server " + endpoint() + ": arbiter of 1 device(s), 0 member(s)", 0), 0u)
      << out;
  EXPECT_NE(
      out.find("\ndevice 0: " + std::to_string(total) + " bytes shared, 0 held, 0 member(s)\n"),
      std::string::npos)
      << out;
  std::tie(code, out) = run_cli({"budgets", "--connect", endpoint(), "--json"});
  ASSERT_EQ(code, 0) << out;
  const auto report = boost::json::parse(out).as_object();
  const auto& device = report.at("devices").as_array().at(0).as_object();
  EXPECT_EQ(device.at("device").to_number<int>(), 0);
  EXPECT_EQ(device.at("total_bytes").to_number<std::uint64_t>(), total);
  EXPECT_TRUE(device.at("members").as_array().empty());
}

TEST_F(arbiter_cli, SettingsAreTheOperatorsAndATenantsAreRefused) {
  serve({"--arbiter-total", "0:" + std::to_string(total)});
  const auto policy = tenant("infer") + ":0:4096:3:2";
  auto [code, out] = run_cli({"budgets", "--connect", endpoint(), "--set-policy", policy});
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("uma: invalid_argument: set_policy is the operator's"), std::string::npos)
      << out;
  std::tie(code, out) = run_cli({"budgets", "--connect", op_endpoint(), "--set-policy", policy,
                                 "--set-total", "0:" + std::to_string(total / 2)});
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("device 0: " + std::to_string(total / 2) + " bytes shared"), std::string::npos)
      << out;
  EXPECT_NE(out.find("policy of '" + tenant("infer") +
                     "' on device 0: minimum 4096 bytes, priority 3, weight 2"),
            std::string::npos)
      << out;
  std::tie(code, out) = run_cli({"budgets", "--connect", endpoint()});  // still served
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("device 0: " + std::to_string(total / 2) + " bytes shared, 0 held"),
            std::string::npos)
      << out;
}

TEST_F(arbiter_cli, AMemberShowsAsARowWithItsClaimAndGrant) {
  serve({"--arbiter-total", "0:" + std::to_string(total), "--arbiter-policy",
         tenant("infer") + ":0:1048576:5:4"});
  arbiter_member member(
      endpoint(), "infer",
      {arbiter_claim{.device = 0,
                     .min_bytes = 1048576,
                     .wanted_bytes = 1ull << 30,
                     .priority = 5,
                     .weight = 4}},
      [](const arbiter_grant&) { return std::uint64_t{0}; }, remote_client_options{.timeout = 10s});
  ASSERT_TRUE(member.wait_for_budget(
      0, [](std::uint64_t b) { return b == 1ull << 30; }, 10s));
  const auto [code, out] = run_cli({"budgets", "--connect", endpoint()});
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("device 0: " + std::to_string(total) + " bytes shared, " +
                     std::to_string(1ull << 30) + " held, 1 member(s)\n  member " +
                     std::to_string(member.id()) + " (" + tenant("infer") + "): active, granted " +
                     std::to_string(1ull << 30)),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("; min 1048576, wanted 1073741824, priority 5, weight 4; 0 shrink(s)"),
            std::string::npos)
      << out;
}

TEST_F(arbiter_cli, ANodeWithoutAnArbiterSaysSo) {
  serve({});
  const auto [code, out] = run_cli({"budgets", "--connect", endpoint()});
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("has no arbiter (uma serve --arbiter-total)"), std::string::npos) << out;
}

TEST_F(arbiter_cli, SnapshotConnectCarriesTheArbitersReportAndItsSection) {
  serve({"--arbiter-total", "0:1073741824"});
  const auto member = join("infer");
  const auto [json, page] = snapshot();
  const auto snap = boost::json::parse(json).as_object();
  ASSERT_TRUE(snap.contains("arbiter")) << json;
  const auto& arbiter = snap.at("arbiter").as_object();
  EXPECT_FALSE(arbiter.contains("server")) << "the snapshot names the server once, at the top";
  EXPECT_EQ(snap.at("server").as_string(), op_endpoint());
  EXPECT_EQ(arbiter.at("members").to_number<std::uint64_t>(), 1u);
  const auto& device = arbiter.at("devices").as_array().at(0).as_object();
  EXPECT_EQ(device.at("total_bytes").to_number<std::uint64_t>(), 1073741824u);
  EXPECT_EQ(device.at("held_bytes").to_number<std::uint64_t>(), 1u << 20);
  const auto& row = device.at("members").as_array().at(0).as_object();
  EXPECT_EQ(row.at("member").to_number<std::uint64_t>(), member->id());
  EXPECT_EQ(row.at("tenant").as_string(), tenant("infer"));
  EXPECT_EQ(row.at("granted_bytes").to_number<std::uint64_t>(), 1u << 20);
  const auto& decisions = arbiter.at("decisions").as_array();
  ASSERT_FALSE(decisions.empty()) << json;
  EXPECT_NE(std::string(decisions.back().at("why").as_string()).find("joined"), std::string::npos)
      << json;
  EXPECT_NE(page.find("<h2>Arbiter"), std::string::npos);
}

TEST_F(arbiter_cli, SnapshotConnectOfANodeWithoutAnArbiterIsAsBefore) {
  serve({});
  const auto [json, page] = snapshot();
  const auto snap = boost::json::parse(json).as_object();
  EXPECT_FALSE(snap.contains("arbiter")) << json;
  EXPECT_TRUE(snap.contains("regions"));
  EXPECT_EQ(page.find("<h2>Arbiter"), std::string::npos);
}

TEST_F(arbiter_cli, ChromiumShowsTheArbiterSectionWithATenantsMarkupAsText) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "chromium is not installed (tools/setup.sh installs it): the page cannot be "
                    "rendered";
  serve({"--arbiter-total", "0:1073741824"});
  const auto member = join("<script>alert(1)");  // a name is printable ASCII without '/'
  static_cast<void>(snapshot());
  child_process chromium({"/bin/sh", "-c",
                          "exec chromium --headless --no-sandbox --disable-gpu "
                          "--virtual-time-budget=5000 --dump-dom \"file://$0\" 2>/dev/null",
                          dir_ + "/snap.html"});
  const auto dom = chromium.read_all(60s);
  static_cast<void>(chromium.wait(20s));
  const auto shown = tenant("&lt;script&gt;alert(1)");
  EXPECT_NE(dom.find("device 0: 1.0 GiB shared, 1.0 MiB held, 1 member(s)"), std::string::npos)
      << dom.substr(0, 4000);
  EXPECT_NE(dom.find("<td>" + shown + "</td><td>active</td>"), std::string::npos);
  EXPECT_NE(dom.find("<td>member " + std::to_string(member->id()) + " (" + shown +
                     ") joined with priority 0</td>"),
            std::string::npos)
      << "the decision's why is not a row of the ledger";
  EXPECT_EQ(dom.find("<script>alert(1)"), std::string::npos) << "the tenant's markup ran";
}

TEST_F(arbiter_cli, TotalsTheBackendCannotMeetAreUsageErrorsAndNothingServes) {
  const auto refused = [&](const std::string& value) {
    return run_cli({"serve", "--socket", socket(), "--for", "5", "--backend", "host",
                    "--host-devices", "1:1048576", "--arbiter-total", value});
  };
  auto [code, out] = refused("0:2097152");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("uma serve: --arbiter-total 0:2097152: device 0 has 1048576 bytes of memory"),
            std::string::npos)
      << out;
  std::tie(code, out) = refused("1:4096");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("uma serve: --arbiter-total 1:4096: the host backend has no device 1"),
            std::string::npos)
      << out;
  std::tie(code, out) = refused("0:100");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("--arbiter-total needs DEVICE:BYTES"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(socket()));
}

}  // namespace
}  // namespace uma
