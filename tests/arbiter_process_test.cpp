// The node's arbiter across processes (docs/distributed.md "One GPU, many processes"): this
// process serves (an allocator, its gateway, a wire server with an arbiter on private sockets)
// and member processes (tests/arbiter_member_helper.cpp: host-backend allocators with an
// emulated device) join it over the tenants' socket. Grants and shrinks between processes, a
// shrink evicted before the bytes move, priorities set by the operator, a member that does not
// evict, a killed member, and bad requests over the socket.

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/send.hpp>

#include <arbiter.grpc.pb.h>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/client.hpp>
#include <uma/actors/remote/arbiter/arbiter.hpp>
#include <uma/actors/remote/arbiter/arbiter_client.hpp>
#include <uma/actors/remote/arbiter/arbiter_member.hpp>
#include <uma/actors/remote/remote_gateway.hpp>
#include <uma/actors/remote/wire/wire_server.hpp>
#include <uma/messages/register_types.hpp>
#include "support/child_process.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;
using test::child_process;

constexpr std::uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

std::string helper_path() {
  const char* v = std::getenv("UMA_TEST_ARBITER_HELPER");
  return v != nullptr && *v != '\0' ? v : UMA_ARBITER_HELPER_PATH;
}

struct node_config : caf::actor_system_config {
  node_config() { register_types(*this); }
};

/// One grant line of a member process.
struct grant_line {
  std::uint64_t sequence = 0, budget = 0, resident = 0;
  bool shrink = false, revoked = false;
};

std::optional<grant_line> parse_grant(const std::string& line) {
  std::istringstream in(line);
  std::string word;
  grant_line g;
  int shrink = 0, revoked = 0;
  if (!(in >> word) || word != "grant")
    return std::nullopt;
  in >> g.sequence >> word >> g.budget >> word >> shrink >> word >> revoked >> word >> g.resident;
  g.shrink = shrink != 0;
  g.revoked = revoked != 0;
  return g;
}

class arbiter_node : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/uma-arbiter-test-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    ASSERT_NE(made, nullptr);
    dir_ = made;
    me_ = "uid " + std::to_string(::getuid());
  }

  void TearDown() override {
    wire_.reset();
    arbiter_.reset();
    if (gw_)
      caf::anon_send_exit(gw_, caf::exit_reason::user_shutdown);
    if (sup_)
      caf::anon_send_exit(sup_, caf::exit_reason::user_shutdown);
    std::filesystem::remove_all(dir_);
  }

  /// The node: `total` bytes of device 0 shared, members given `deadline` to evict.
  void serve(std::uint64_t total = GiB, std::chrono::milliseconds deadline = 10s) {
    supervisor_config cfg;
    cfg.allocator.backend.choice = backend_choice::host;
    sup_ = spawn_supervisor(sys_, std::move(cfg));
    gw_ = spawn_remote_gateway(sys_, sup_, {.operator_secret = operator_});
    arbiter_ = std::make_shared<arbiter>(
        arbiter_config{.totals = {{0, total}}, .evict_deadline = deadline});
    wire_ = std::make_unique<wire_server>(sys_, gw_,
                                          wire_server_config{.socket_path = dir_ + "/s",
                                                             .operator_socket_path = dir_ + "/op",
                                                             .operator_secret = operator_,
                                                             .arbiter = arbiter_});
  }

  [[nodiscard]] std::string target() const { return "unix:" + dir_ + "/s"; }
  [[nodiscard]] std::string operator_target() const { return "unix:" + dir_ + "/op"; }

  /// A member process; its "joined" line read (fails the test otherwise).
  std::unique_ptr<child_process> member(const std::string& name, std::uint64_t wanted,
                                        std::uint64_t priority, std::uint64_t regions,
                                        std::uint64_t bytes, const char* mode = "honest",
                                        std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{helper_path(),
                                  target(),
                                  name,
                                  "0",
                                  std::to_string(wanted),
                                  std::to_string(priority),
                                  std::to_string(regions),
                                  std::to_string(bytes),
                                  mode};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto child = std::make_unique<child_process>(argv);
    for (auto line = child->read_line(15s); line; line = child->read_line(15s)) {
      if (line->starts_with("joined member"))
        return child;
      if (line->starts_with("refused"))
        ADD_FAILURE() << *line;
      if (auto g = parse_grant(*line))
        last_[child.get()] = *g;
    }
    ADD_FAILURE() << "member " << name << " did not join";
    return child;
  }

  /// Reads `child`'s grant lines until one satisfies `pred` (nullopt after `timeout`).
  std::optional<grant_line> until(child_process& child,
                                  const std::function<bool(const grant_line&)>& pred,
                                  std::chrono::milliseconds timeout = 15s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    if (auto it = last_.find(&child); it != last_.end() && pred(it->second))
      return it->second;
    while (std::chrono::steady_clock::now() < deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      const auto line = child.read_line(left);
      if (!line)
        return std::nullopt;
      if (auto g = parse_grant(*line)) {
        last_[&child] = *g;
        if (pred(*g))
          return g;
      }
    }
    return std::nullopt;
  }

  /// The row of the member whose tenant is `name` in the operator's report.
  std::optional<arbiter_member_row> row(const std::string& name) const {
    for (const auto& d : arbiter_->report().devices)
      for (const auto& m : d.members)
        if (m.tenant == me_ + "/" + name)
          return m;
    return std::nullopt;
  }

  std::string dir_;
  std::string me_;
  node_config cfg_;
  caf::actor_system sys_{cfg_};
  operator_key operator_ = make_operator_key();
  allocator_supervisor_actor sup_;
  remote_allocator_actor gw_;
  std::shared_ptr<arbiter> arbiter_;
  std::unique_ptr<wire_server> wire_;
  std::map<child_process*, grant_line> last_;
};

TEST_F(arbiter_node, AShrinkIsEvictedBeforeAnotherProcessGetsTheBytes) {
  serve(GiB);
  auto a = member("a", GiB, 0, 8, 64 * MiB);  // 512 MiB resident, wants all of it
  ASSERT_TRUE(until(*a, [](const grant_line& g) { return g.budget == GiB; }));
  arbiter_->set_policy(me_ + "/b", 0, {0, 5, 1});
  auto b = member("b", 768 * MiB, 5, 0, 0);
  // a is told to keep 256 MiB, evicts its least recently used regions at once and says so.
  const auto shrink = until(*a, [](const grant_line& g) { return g.shrink; });
  ASSERT_TRUE(shrink);
  EXPECT_EQ(shrink->budget, 256 * MiB);
  EXPECT_LE(shrink->resident, 256 * MiB);
  ASSERT_TRUE(until(*b, [](const grant_line& g) { return g.budget == 768 * MiB; }));
  // The ledger: a's shrink decided and acknowledged before b's growth.
  const auto report = arbiter_->report();
  ASSERT_EQ(report.devices.size(), 1u);
  EXPECT_LE(report.devices[0].held_bytes, GiB);
  std::optional<std::size_t> shrunk, grown;
  for (std::size_t i = 0; i < report.decisions.size(); ++i) {
    const auto& d = report.decisions[i];
    if (d.tenant == me_ + "/a" && d.to_bytes == 256 * MiB && !shrunk)
      shrunk = i;
    if (d.tenant == me_ + "/b" && d.to_bytes == 768 * MiB)
      grown = i;
  }
  ASSERT_TRUE(shrunk && grown);
  EXPECT_LT(*shrunk, *grown);
  EXPECT_EQ(row("a")->shrinks, 1u);
  EXPECT_EQ(row("a")->state, "active");
}

TEST_F(arbiter_node, AKilledMembersBytesGoToTheOthersWithinASecond) {
  serve(GiB);
  auto a = member("a", GiB, 0, 0, 0);
  auto b = member("b", GiB, 0, 0, 0);
  ASSERT_TRUE(until(*a, [](const grant_line& g) { return g.budget == 512 * MiB; }));
  ASSERT_TRUE(until(*b, [](const grant_line& g) { return g.budget == 512 * MiB; }));
  const auto killed = std::chrono::steady_clock::now();
  b->signal(SIGKILL);
  ASSERT_TRUE(until(
      *a, [](const grant_line& g) { return g.budget == GiB; }, 5s));
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 1s);
  EXPECT_FALSE(row("b"));
}

TEST_F(arbiter_node, AMemberThatDoesNotEvictLosesEveryGrantAfterTheDeadline) {
  serve(GiB, 300ms);
  auto a = member("a", GiB, 0, 8, 64 * MiB, "stubborn");
  ASSERT_TRUE(until(*a, [](const grant_line& g) { return g.budget == GiB; }));
  arbiter_->set_policy(me_ + "/b", 0, {0, 5, 1});
  auto b = member("b", GiB, 5, 0, 0);
  const auto shrink = until(*a, [](const grant_line& g) { return g.shrink; });
  ASSERT_TRUE(shrink);
  EXPECT_EQ(shrink->budget, 0u);
  EXPECT_EQ(shrink->resident, 512 * MiB);  // it kept everything
  // Until the deadline b gets only what a said it does not hold (512 MiB); the rest once a
  // lost every grant.
  const auto revoked = until(
      *a, [](const grant_line& g) { return g.revoked; }, 5s);
  ASSERT_TRUE(revoked);
  ASSERT_TRUE(until(
      *b, [](const grant_line& g) { return g.budget == GiB; }, 5s));
  EXPECT_EQ(row("a")->state, "revoked");
  EXPECT_EQ(arbiter_->report().revocations, 1u);
}

TEST_F(arbiter_node, TheOperatorRaisesAPriorityLiveAndOnlyTheOperatorMay) {
  serve(GiB);
  auto a = member("a", GiB, 0, 0, 0);
  auto b = member("b", 768 * MiB, 0, 0, 0);
  ASSERT_TRUE(until(*b, [](const grant_line& g) { return g.budget == 512 * MiB; }));
  arbiter_client tenant(target());
  const auto before = arbiter_->report();
  try {
    static_cast<void>(tenant.set_policy(me_ + "/b", 0, {0, 3, 1}));
    ADD_FAILURE() << "a tenant set a policy";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("is the operator's"), std::string::npos) << e.what();
  }
  EXPECT_EQ(arbiter_->report().decisions.size(), before.decisions.size());
  arbiter_client op(operator_target());
  static_cast<void>(op.set_policy(me_ + "/b", 0, {0, 3, 1}));
  ASSERT_TRUE(until(*b, [](const grant_line& g) { return g.budget == 768 * MiB; }));
  ASSERT_TRUE(until(*a, [](const grant_line& g) { return g.budget == 256 * MiB; }));
  // A tenant's report lists its own members only, the operator's all of them.
  EXPECT_EQ(op.report().devices.at(0).members.size(), 2u);
  EXPECT_EQ(tenant.report().devices.at(0).members.size(), 2u);  // both are this uid's
}

/// A member in this process whose grants are only recorded.
struct recorded {
  std::vector<arbiter_grant> grants;
  std::mutex mutex;
  arbiter_apply apply() {
    return [this](const arbiter_grant& g) {
      std::lock_guard lock(mutex);
      grants.push_back(g);
      return std::uint64_t{0};
    };
  }
};

TEST_F(arbiter_node, BadRequestsOverTheSocketAreRefusedAndChangeNothing) {
  serve(GiB);
  recorded r;
  arbiter_member honest(target(), "honest", {arbiter_claim{0, 0, 512 * MiB, 0, 1, false}},
                        r.apply());
  const auto before = arbiter_->report();
  const struct {
    const char* what;
    std::string name;
    arbiter_claim claim;
    errc code;
    const char* says;
  } refusals[] = {
      {"its own minimum", "m", {0, 64 * MiB, GiB, 0, 1, false}, errc::invalid_argument, "operator"},
      {"its own priority", "p", {0, 0, GiB, 9, 1, false}, errc::invalid_argument, "operator"},
      {"an absurd size", "s", {0, 0, 1ull << 63, 0, 1, false}, errc::invalid_argument, "total"},
      {"a device not divided", "d", {7, 0, MiB, 0, 1, false}, errc::invalid_argument, "device 7"},
      {"a weight out of range", "w", {0, 0, MiB, 0, 5000, false}, errc::invalid_argument, "weight"},
      {"an empty name", "", {0, 0, MiB, 0, 1, false}, errc::invalid_argument, "name"},
      {"a name with a control character",
       "a\nb",
       {0, 0, MiB, 0, 1, false},
       errc::invalid_argument,
       "name"},
  };
  for (const auto& x : refusals) {
    try {
      recorded other;
      arbiter_member m(target(), x.name, {x.claim}, other.apply());
      ADD_FAILURE() << x.what << ": joined";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), x.code) << x.what << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(x.says), std::string::npos)
          << x.what << ": " << e.what();
    }
  }
  EXPECT_THROW(honest.want(0, 1ull << 62), error);
  EXPECT_THROW(honest.want(3, MiB), error);
  const auto after = arbiter_->report();
  EXPECT_EQ(after.members, before.members);
  EXPECT_EQ(after.decisions.size(), before.decisions.size());
  // A forged key (the member's id with a guessed secret) names no member.
  auto channel = grpc::CreateChannel(target(), grpc::InsecureChannelCredentials());
  auto stub = wire::v1::Arbiter::NewStub(channel);
  grpc::ClientContext ctx;
  wire::v1::DemandRequest forged;
  forged.mutable_key()->set_id(honest.id());
  forged.mutable_key()->set_secret_hi(1);
  forged.set_wanted_bytes(GiB);
  wire::v1::ArbiterAck ack;
  const auto status = stub->Demand(&ctx, forged, &ack);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_EQ(arbiter_->report().decisions.size(), before.decisions.size());
}

TEST_F(arbiter_node, ARevokedClientsFurtherAllocationsAreRefused) {
  node_config cfg;
  caf::actor_system sys{cfg};
  allocator_config ac;
  ac.backend.choice = backend_choice::host;
  ac.backend.host_devices = {1, 8ull << 30};
  client c(sys, ac);
  auto kept = c.allocate<std::byte>(4 * MiB);
  arbiter_grant revoked;
  revoked.revoked = true;
  revoked.why = "did not evict in time";
  EXPECT_EQ(apply_to(c)(revoked), 0u);
  EXPECT_EQ(c.device_budget(0), 1u);
  try {
    static_cast<void>(c.allocate<std::byte>(4 * MiB));
    ADD_FAILURE() << "a revoked member allocated";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::quota_exceeded) << e.what();
  }
}

TEST_F(arbiter_node, JoiningANodeWithoutAnArbiterSaysSo) {
  supervisor_config cfg;
  cfg.allocator.backend.choice = backend_choice::host;
  sup_ = spawn_supervisor(sys_, std::move(cfg));
  gw_ = spawn_remote_gateway(sys_, sup_, {.operator_secret = operator_});
  wire_ = std::make_unique<wire_server>(
      sys_, gw_, wire_server_config{.socket_path = dir_ + "/s", .operator_secret = operator_});
  recorded r;
  try {
    arbiter_member m(target(), "x", {arbiter_claim{0, 0, MiB, 0, 1, false}}, r.apply());
    ADD_FAILURE() << "joined a node without an arbiter";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::not_supported);
    EXPECT_NE(std::string(e.what()).find("has no arbiter"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace uma
