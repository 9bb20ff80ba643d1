// The C ABI's tiers and copies (actors/c/uma.h, docs/c_abi.md "Tiers and copies"), called as a
// C program calls them, on the host backend's emulated device: the host tier and device memory
// counted in the stats and the budget, copies moving exact bytes and counted by direction, bad
// input refused with a status and nothing changed, and uma_destroy freeing what is still held.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <uma/c/uma.h>

namespace {

constexpr std::uint64_t MiB = std::uint64_t{1} << 20;

class c_tiers : public ::testing::Test {
 protected:
  c_tiers() {
    uma_config c;
    uma_config_init(&c);
    c.backend = UMA_BACKEND_HOST;
    c.host_devices = 1;
    c.host_device_bytes = 64 * MiB;
    c.device_budget_bytes = 16 * MiB;
    EXPECT_EQ(uma_create(&c, &a_), UMA_OK) << uma_last_error();
  }
  ~c_tiers() override { uma_destroy(a_); }

  uma_stats stats() {
    uma_stats s{};
    s.struct_size = sizeof s;
    EXPECT_EQ(uma_get_stats(a_, &s), UMA_OK) << uma_last_error();
    return s;
  }
  uma_residency_report report() {
    uma_residency_report r{};
    r.struct_size = sizeof r;
    EXPECT_EQ(uma_get_residency(a_, &r), UMA_OK) << uma_last_error();
    return r;
  }
  void* host(std::size_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(uma_host_alloc(a_, bytes, &p), UMA_OK) << uma_last_error();
    return p;
  }
  void* device(std::size_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(uma_device_alloc(a_, bytes, 0, &p), UMA_OK) << uma_last_error();
    return p;
  }

  uma_allocator* a_ = nullptr;
};

TEST_F(c_tiers, TierBlocksAreCountedInTheStatsAndDeviceMemoryInTheBudget) {
  void* h = host(3 * MiB);
  void* d = device(2 * MiB);
  ASSERT_NE(h, nullptr);
  ASSERT_NE(d, nullptr);
  auto s = stats();
  EXPECT_EQ(s.host_tier_bytes, 3 * MiB);
  EXPECT_EQ(s.device_tier_bytes, 2 * MiB);
  EXPECT_EQ(report().devices[0].resident_bytes, 2 * MiB);
  EXPECT_EQ(report().devices[0].held_bytes, 2 * MiB);
  EXPECT_EQ(uma_tier_free(a_, h), UMA_OK) << uma_last_error();
  EXPECT_EQ(uma_tier_free(a_, d), UMA_OK) << uma_last_error();
  s = stats();  // the releases queued by the frees are drained first
  EXPECT_EQ(s.host_tier_bytes, 0u);
  EXPECT_EQ(s.device_tier_bytes, 0u);
  EXPECT_EQ(report().devices[0].resident_bytes, 0u);
}

TEST_F(c_tiers, CopiesMoveExactBytesAndAreCountedByDirection) {
  auto* h = static_cast<unsigned char*>(host(MiB));
  auto* d = static_cast<unsigned char*>(device(MiB));
  void* m = nullptr;
  ASSERT_EQ(uma_malloc(a_, MiB, 0, nullptr, &m), UMA_OK) << uma_last_error();
  std::iota(h, h + MiB, static_cast<unsigned char>(3));
  ASSERT_EQ(uma_copy(a_, d, h, MiB, nullptr), UMA_OK) << uma_last_error();
  ASSERT_EQ(uma_copy(a_, m, d, MiB, nullptr), UMA_OK) << uma_last_error();
  std::memset(h, 0, MiB);
  ASSERT_EQ(uma_copy(a_, h + 4096, static_cast<unsigned char*>(m) + 8192, 4096, nullptr), UMA_OK)
      << uma_last_error();
  EXPECT_EQ(std::memcmp(d, m, MiB), 0);
  EXPECT_EQ(std::memcmp(h + 4096, static_cast<unsigned char*>(m) + 8192, 4096), 0);
  const auto s = stats();
  EXPECT_EQ(s.copy_to_device_bytes, MiB);
  EXPECT_EQ(s.copy_other_bytes, MiB);
  EXPECT_EQ(s.copy_to_host_bytes, 4096u);
  EXPECT_EQ(s.copies, 3u);
  const auto r = report();
  EXPECT_EQ(r.copy_to_device_bytes, MiB);
  EXPECT_EQ(r.copy_to_host_bytes, 4096u);
  std::vector<char> json(1 << 16);
  std::size_t needed = 0;
  ASSERT_EQ(uma_residency_json(a_, json.data(), json.size(), &needed), UMA_OK);
  EXPECT_NE(std::string(json.data()).find("\"copies\":{\"to_device_bytes\":1048576"),
            std::string::npos)
      << json.data();
  EXPECT_EQ(uma_free(a_, m, MiB, 0, nullptr), UMA_OK);
}

TEST_F(c_tiers, BadInputIsRefusedWithAStatusAndChangesNothing) {
  void* out = reinterpret_cast<void*>(1);
  EXPECT_EQ(uma_host_alloc(nullptr, 64, &out), UMA_ERR_NULL_ARGUMENT);
  EXPECT_EQ(uma_host_alloc(a_, 64, nullptr), UMA_ERR_NULL_ARGUMENT);
  EXPECT_EQ(uma_host_alloc(a_, 0, &out), UMA_OK);
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(uma_device_alloc(a_, 64, 1, &out), UMA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(uma_last_error()).find("device 1"), std::string::npos);
  EXPECT_EQ(uma_device_alloc(a_, 64, -1, &out), UMA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(uma_device_alloc(a_, 32 * MiB, 0, &out), UMA_ERR_QUOTA_EXCEEDED);  // budget 16 MiB
  EXPECT_NE(std::string(uma_last_error()).find("budget"), std::string::npos);
  int on_stack = 0;
  EXPECT_EQ(uma_tier_free(a_, &on_stack), UMA_ERR_UNKNOWN_POINTER);
  EXPECT_EQ(uma_tier_free(a_, nullptr), UMA_OK);

  auto* h = static_cast<unsigned char*>(host(MiB));
  auto* d = static_cast<unsigned char*>(device(MiB));
  std::memset(d, 5, MiB);
  EXPECT_EQ(uma_copy(a_, d, &on_stack, sizeof on_stack, nullptr), UMA_ERR_UNKNOWN_POINTER);
  EXPECT_EQ(uma_copy(a_, d, h, MiB + 1, nullptr), UMA_ERR_UNKNOWN_POINTER);      // past the block
  EXPECT_EQ(uma_copy(a_, h, h + 100, 4096, nullptr), UMA_ERR_INVALID_ARGUMENT);  // overlap
  EXPECT_EQ(uma_copy(a_, nullptr, h, 64, nullptr), UMA_ERR_NULL_ARGUMENT);
  EXPECT_EQ(uma_copy(a_, d, h, 0, nullptr), UMA_OK);  // nothing
  EXPECT_EQ(d[0], 5);
  EXPECT_EQ(stats().copies, 0u);
  EXPECT_EQ(uma_tier_free(a_, h + 64), UMA_ERR_UNKNOWN_POINTER);  // not its start
  void* m = nullptr;
  ASSERT_EQ(uma_malloc(a_, 4096, 0, nullptr, &m), UMA_OK);
  EXPECT_EQ(uma_tier_free(a_, m), UMA_ERR_UNKNOWN_POINTER);                    // a uma_malloc block
  EXPECT_EQ(uma_prefetch(a_, h, 4096, 0, nullptr), UMA_ERR_INVALID_ARGUMENT);  // never migrates
  EXPECT_EQ(uma_free(a_, m, 4096, 0, nullptr), UMA_OK);
}

TEST(c_tiers_stop, DestroyFreesTierMemoryStillHeld) {
  uma_config c;
  uma_config_init(&c);
  c.backend = UMA_BACKEND_HOST;
  uma_allocator* a = nullptr;
  ASSERT_EQ(uma_create(&c, &a), UMA_OK) << uma_last_error();
  void* h = nullptr;
  void* d = nullptr;
  ASSERT_EQ(uma_host_alloc(a, 3 * MiB, &h), UMA_OK) << uma_last_error();
  ASSERT_EQ(uma_device_alloc(a, MiB, 0, &d), UMA_OK) << uma_last_error();
  uma_stop_report r{};
  r.struct_size = sizeof r;
  ASSERT_EQ(uma_destroy_with_report(a, &r), UMA_OK) << uma_last_error();
  EXPECT_EQ(r.regions_freed, 2u);
  EXPECT_EQ(r.bytes_freed, 4 * MiB);
  EXPECT_EQ(r.regions_leaked, 0u);
}

}  // namespace
