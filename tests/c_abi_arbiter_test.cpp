// The node's arbiter through the C ABI (actors/c/uma.h, docs/c_abi.md "The node's arbiter"): a
// `uma serve --arbiter-total` child on a private socket, and members joined by this process's
// allocators (host backend, one emulated device). Budgets arrive and move, a lowered one reaches
// the allocator's device budget, PyTorch's hooks spill their newest blocks to a lowered limit and
// bring the oldest back first, bad input is refused naming it, and leaving frees the bytes.

#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <uma/c/uma.h>
#include "support/child_process.hpp"

namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t MiB = 1ull << 20, GiB = 1ull << 30;
constexpr std::uint64_t total = GiB;  // --arbiter-total 0:1 GiB
constexpr std::uint32_t wait_ms = 10'000;

std::string cli_path() {
  const char* v = std::getenv("UMA_TEST_CLI");
  return v != nullptr && *v != '\0' ? v : UMA_CLI_PATH;
}

uma_config host_config() {
  uma_config c;
  uma_config_init(&c);
  c.backend = UMA_BACKEND_HOST;
  c.host_devices = 1;
  c.host_device_bytes = 8 * GiB;  // above the arbiter's total: every grant fits the device
  return c;
}

uma_arbiter_claim claim(std::uint64_t wanted, std::uint32_t priority = 0) {
  uma_arbiter_claim c;
  uma_arbiter_claim_init(&c);
  c.wanted_bytes = wanted;
  c.priority = priority;
  return c;
}

std::uint64_t device_budget(uma_allocator* a) {
  uma_residency_report r{};
  r.struct_size = sizeof r;
  EXPECT_EQ(uma_get_residency(a, &r), UMA_OK) << uma_last_error();
  return r.devices[0].budget_bytes;
}

/// The report as JSON, asked again while it grew between the size and the copy.
boost::json::value report_of(const uma_arbiter* m) {
  size_t needed = 0;
  EXPECT_EQ(uma_arbiter_report_json(m, nullptr, 0, &needed), UMA_ERR_BUFFER_TOO_SMALL);
  std::string text;
  uma_status s = UMA_ERR_BUFFER_TOO_SMALL;
  while (s == UMA_ERR_BUFFER_TOO_SMALL) {
    text.assign(needed, '\0');
    s = uma_arbiter_report_json(m, text.data(), text.size(), &needed);
  }
  EXPECT_EQ(s, UMA_OK) << uma_last_error();
  return boost::json::parse(text.c_str());
}

/// Leaves on scope exit (before the allocator it joined with is destroyed).
using member_ptr = std::unique_ptr<uma_arbiter, decltype(&uma_arbiter_leave)>;

class c_abi_arbiter : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/uma-c-arbiter-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    target_ = "unix:" + dir_ + "/s";
    const auto policy = "uid " + std::to_string(::getuid()) + "/big:0:0:10:1";
    node_ = std::make_unique<uma::test::child_process>(
        std::vector<std::string>{cli_path(), "serve", "--backend", "host", "--host-devices",
                                 "1:8589934592", "--arbiter-total", "0:" + std::to_string(total),
                                 "--arbiter-policy", policy, "--socket", dir_ + "/s"});
    for (auto line = node_->read_line(20s); line; line = node_->read_line(20s))
      if (line->find("listening on") != std::string::npos)
        return;
    FAIL() << "uma serve did not say it is listening";
  }
  void TearDown() override {
    node_.reset();
    std::filesystem::remove_all(dir_);
  }

  member_ptr join(uma_allocator* a, const char* name, uma_arbiter_claim c) {
    uma_arbiter* m = nullptr;
    EXPECT_EQ(uma_arbiter_join(a, target_.c_str(), name, &c, 1, &m), UMA_OK) << uma_last_error();
    return {m, &uma_arbiter_leave};
  }
  static std::uint64_t wait_within(const uma_arbiter* m, std::uint64_t lo, std::uint64_t hi) {
    std::uint64_t b = 0;
    EXPECT_EQ(uma_arbiter_wait_budget(m, 0, lo, hi, wait_ms, &b), UMA_OK) << uma_last_error();
    return b;
  }

  std::string dir_, target_;
  std::unique_ptr<uma::test::child_process> node_;
};

struct allocator_ptr {
  allocator_ptr() {
    const auto c = host_config();
    EXPECT_EQ(uma_create(&c, &a), UMA_OK) << uma_last_error();
  }
  ~allocator_ptr() { (void)uma_destroy(a); }
  uma_allocator* a = nullptr;
};

TEST_F(c_abi_arbiter, JoinAppliesItsFirstBudgetToTheAllocator) {
  allocator_ptr a;
  auto m = join(a.a, "first", claim(512 * MiB));
  ASSERT_NE(m, nullptr);
  std::uint64_t b = 0;
  ASSERT_EQ(uma_arbiter_budget(m.get(), 0, &b), UMA_OK) << uma_last_error();
  EXPECT_EQ(b, 512 * MiB);
  EXPECT_EQ(device_budget(a.a), 512 * MiB);
  const auto r = report_of(m.get());
  EXPECT_EQ(r.at("devices").at(0).at("total_bytes").to_number<std::uint64_t>(), total);
  EXPECT_EQ(r.at("devices").at(0).at("members").as_array().size(), 1u);
  EXPECT_FALSE(r.at("revoked").as_bool());
}

TEST_F(c_abi_arbiter, ASecondMemberShrinksTheFirstAndLeavingGivesItBack) {
  allocator_ptr a1, a2;
  auto first = join(a1.a, "first", claim(total));
  EXPECT_EQ(wait_within(first.get(), total, total), total);
  {
    auto second = join(a2.a, "second", claim(total));
    EXPECT_EQ(wait_within(first.get(), 0, total / 2), total / 2);
    EXPECT_EQ(wait_within(second.get(), total / 2, total / 2), total / 2);
    EXPECT_EQ(device_budget(a1.a), total / 2);  // applied (evicted) before acknowledged
    EXPECT_EQ(report_of(first.get()).at("devices").at(0).at("members").as_array().size(), 2u);
  }
  EXPECT_EQ(wait_within(first.get(), total, total), total);
  EXPECT_EQ(device_budget(a1.a), total);
}

TEST_F(c_abi_arbiter, WantMovesTheBudgets) {
  allocator_ptr a1, a2;
  auto first = join(a1.a, "first", claim(total));
  auto second = join(a2.a, "second", claim(total));
  EXPECT_EQ(wait_within(first.get(), total / 2, total / 2), total / 2);
  ASSERT_EQ(uma_arbiter_want(second.get(), 0, 256 * MiB, 0), UMA_OK) << uma_last_error();
  EXPECT_EQ(wait_within(first.get(), total - 256 * MiB, total), total - 256 * MiB);
  ASSERT_EQ(uma_arbiter_want(first.get(), 0, 0, 1), UMA_OK) << uma_last_error();  // idle
  EXPECT_EQ(wait_within(second.get(), 256 * MiB, 256 * MiB), 256 * MiB);
  EXPECT_EQ(wait_within(first.get(), 0, 0), 0u);
  EXPECT_EQ(device_budget(a1.a), 1u);  // a budget of 0 bytes is 1 byte
}

void expect_refused(uma_status got, uma_status want, const std::string& names) {
  EXPECT_EQ(got, want) << uma_status_string(got) << ": " << uma_last_error();
  EXPECT_NE(std::string(uma_last_error()).find(names), std::string::npos) << uma_last_error();
}

TEST_F(c_abi_arbiter, JoinRefusesBadInputNamingIt) {
  allocator_ptr a;
  const auto t = target_.c_str();
  auto c = claim(MiB);
  uma_arbiter* m = nullptr;
  expect_refused(uma_arbiter_join(nullptr, t, "x", &c, 1, &m), UMA_ERR_NULL_ARGUMENT, "allocator");
  expect_refused(uma_arbiter_join(a.a, nullptr, "x", &c, 1, &m), UMA_ERR_NULL_ARGUMENT, "target");
  expect_refused(uma_arbiter_join(a.a, "", "x", &c, 1, &m), UMA_ERR_INVALID_ARGUMENT, "target");
  expect_refused(uma_arbiter_join(a.a, t, nullptr, &c, 1, &m), UMA_ERR_NULL_ARGUMENT, "name");
  expect_refused(uma_arbiter_join(a.a, t, "", &c, 1, &m), UMA_ERR_INVALID_ARGUMENT, "name");
  expect_refused(uma_arbiter_join(a.a, t, "x", nullptr, 1, &m), UMA_ERR_NULL_ARGUMENT, "claims");
  expect_refused(uma_arbiter_join(a.a, t, "x", &c, 0, &m), UMA_ERR_INVALID_ARGUMENT, "count");
  expect_refused(uma_arbiter_join(a.a, t, "x", &c, 1, nullptr), UMA_ERR_NULL_ARGUMENT, "out");
  auto small = c;
  small.struct_size = 8;
  expect_refused(uma_arbiter_join(a.a, t, "x", &small, 1, &m), UMA_ERR_INVALID_ARGUMENT,
                 "claims[0].struct_size");
  auto elsewhere = c;
  elsewhere.device = 3;
  expect_refused(uma_arbiter_join(a.a, t, "x", &elsewhere, 1, &m), UMA_ERR_INVALID_ARGUMENT,
                 "claims[0].device is 3");
  auto heavy = c;
  heavy.weight = 2000;  // the arbiter's rule (1 to 1000), its refusal
  expect_refused(uma_arbiter_join(a.a, t, "x", &heavy, 1, &m), UMA_ERR_INVALID_ARGUMENT, "weight");
  auto favoured = c;
  favoured.priority = 5;  // above the default policy's 0
  expect_refused(uma_arbiter_join(a.a, t, "x", &favoured, 1, &m), UMA_ERR_INVALID_ARGUMENT,
                 "priority");
  const auto nowhere = "unix:" + dir_ + "/none";
  expect_refused(uma_arbiter_join(a.a, nowhere.c_str(), "x", &c, 1, &m), UMA_ERR_BACKEND, nowhere);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(report_of(join(a.a, "fine", c).get()).at("members").to_number<std::uint64_t>(), 1u);
}

TEST_F(c_abi_arbiter, MemberCallsRefuseBadInputNamingIt) {
  allocator_ptr a;
  auto m = join(a.a, "first", claim(MiB));
  std::uint64_t b = 0;
  expect_refused(uma_arbiter_budget(nullptr, 0, &b), UMA_ERR_NULL_ARGUMENT, "member");
  expect_refused(uma_arbiter_budget(m.get(), 0, nullptr), UMA_ERR_NULL_ARGUMENT, "out");
  expect_refused(uma_arbiter_budget(m.get(), 1, &b), UMA_ERR_INVALID_ARGUMENT, "device 1");
  expect_refused(uma_arbiter_want(m.get(), 1, MiB, 0), UMA_ERR_INVALID_ARGUMENT, "device 1");
  expect_refused(uma_arbiter_want(m.get(), 0, 2 * total, 0), UMA_ERR_INVALID_ARGUMENT, "wants");
  expect_refused(uma_arbiter_wait_budget(m.get(), 0, 2, 1, 10, &b), UMA_ERR_INVALID_ARGUMENT,
                 "at_least");
  expect_refused(uma_arbiter_wait_budget(m.get(), 0, 2 * MiB, total, 50, &b), UMA_ERR_TIMEOUT,
                 "not within");
  EXPECT_EQ(b, MiB);  // the budget when it returned
  char tiny[4];
  size_t needed = 0;
  expect_refused(uma_arbiter_report_json(m.get(), tiny, sizeof tiny, &needed),
                 UMA_ERR_BUFFER_TOO_SMALL, "uma_arbiter_report_json");
  EXPECT_GT(needed, sizeof tiny);
  uma_arbiter_leave(nullptr);  // a no-op
}

TEST_F(c_abi_arbiter, AMembershipTheNodeEndsIsReported) {
  allocator_ptr a;
  auto m = join(a.a, "first", claim(MiB));
  node_.reset();  // SIGKILL: the node is gone
  std::uint64_t b = 0;
  expect_refused(uma_arbiter_wait_budget(m.get(), 0, 2 * MiB, total, wait_ms, &b),
                 UMA_ERR_ALLOCATOR_STOPPED, "ended");
}

/// PyTorch's hooks on the default allocator: three blocks, oldest first.
struct torch_blocks {
  torch_blocks() {
    const auto c = host_config();
    EXPECT_EQ(uma_default_allocator(&c, &a), UMA_OK) << uma_last_error();
    for (auto size : sizes)
      blocks.push_back(uma_torch_malloc(static_cast<ptrdiff_t>(size), 0, nullptr));
  }
  ~torch_blocks() {
    for (std::size_t i = 0; i < blocks.size(); ++i)
      uma_torch_free(blocks[i], static_cast<ptrdiff_t>(sizes[i]), 0, nullptr);
  }
  static constexpr std::uint64_t sizes[3] = {32 * MiB, 64 * MiB, 128 * MiB};
  uma_allocator* a = nullptr;
  std::vector<void*> blocks;
};

TEST(c_abi_torch_spill, ALoweredFractionSpillsTheNewestBlocksAndARaisedOneBringsThemBack) {
  torch_blocks t;
  const auto memory = 8.0 * static_cast<double>(GiB);
  const auto before = uma_torch_spilled_bytes();
  uma_torch_set_memory_fraction(static_cast<double>(100 * MiB) / memory, 0);
  EXPECT_EQ(uma_torch_spilled_bytes() - before, 128 * MiB);  // the newest block only
  uma_torch_set_memory_fraction(1.0, 0);                     // no limit: every block back
  uma_torch_set_memory_fraction(static_cast<double>(40 * MiB) / memory, 0);
  EXPECT_EQ(uma_torch_spilled_bytes() - before, 128 * MiB + 192 * MiB);  // the two newest
}

TEST_F(c_abi_arbiter, PyTorchsBlocksFollowTheGrantNewestOutOldestBack) {
  torch_blocks t;
  allocator_ptr other;
  const auto before = uma_torch_spilled_bytes();
  auto torch = join(t.a, "torch", claim(total));
  EXPECT_EQ(wait_within(torch.get(), total, total), total);
  EXPECT_EQ(uma_torch_spilled_bytes(), before);  // 224 MiB placed, under the grant
  auto big = join(other.a, "big", claim(total - 100 * MiB, 10));
  EXPECT_EQ(wait_within(torch.get(), 0, 100 * MiB), 100 * MiB);
  EXPECT_EQ(uma_torch_spilled_bytes() - before, 128 * MiB);  // the newest block
  ASSERT_EQ(uma_arbiter_want(big.get(), 0, 4096, 0), UMA_OK) << uma_last_error();
  EXPECT_EQ(wait_within(torch.get(), total - 4096, total - 4096), total - 4096);  // back
  ASSERT_EQ(uma_arbiter_want(big.get(), 0, total - 40 * MiB, 0), UMA_OK) << uma_last_error();
  EXPECT_EQ(wait_within(torch.get(), 0, 40 * MiB), 40 * MiB);
  EXPECT_EQ(uma_torch_spilled_bytes() - before, 128 * MiB + 192 * MiB);  // the two newest
  // The acknowledgement counted the hooks' blocks still on the device: the oldest, 32 MiB.
  const auto r = report_of(torch.get());
  std::optional<std::uint64_t> resident;
  for (const auto& row : r.at("devices").at(0).at("members").as_array())
    if (row.at("tenant").as_string().ends_with("/torch"))
      resident = row.at("resident_bytes").to_number<std::uint64_t>();
  ASSERT_TRUE(resident.has_value()) << r;
  EXPECT_GE(*resident, 32 * MiB);
  EXPECT_LT(*resident, 64 * MiB);
}

}  // namespace
