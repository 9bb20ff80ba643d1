// The C ABI on real CUDA streams (label gpu): a block freed on stream A while a kernel on A still
// uses it is not reused on stream B before the event recorded at the free has completed; a plan
// on a block charges the block's pages (issue 25).

#include <gtest/gtest.h>

#include <vector>

#include <uma/c/uma.h>
#include <uma/sys/cuda_backend.hpp>

#include "support/cuda_kernels.hpp"

namespace uma {
namespace {

class gpu_c_abi : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto probe = probe_cuda();
    if (!probe.usable)
      GTEST_SKIP() << "no usable CUDA device: " << probe.reason;
    uma_config c;
    uma_config_init(&c);
    c.backend = UMA_BACKEND_CUDA;
    ASSERT_EQ(uma_create(&c, &alloc_), UMA_OK) << uma_last_error();
    a_ = test::create_stream();
    b_ = test::create_stream();
  }
  void TearDown() override {
    test::destroy_stream(a_);
    test::destroy_stream(b_);
    if (alloc_ != nullptr) {
      EXPECT_EQ(uma_destroy(alloc_), UMA_OK);
    }
  }

  uma_allocator* alloc_ = nullptr;
  void* a_ = nullptr;
  void* b_ = nullptr;
};

TEST_F(gpu_c_abi, ABlockInUseOnStreamAIsNotReusedOnStreamBBeforeTheEvent) {
  constexpr std::size_t n = 16 * 1024;  // 64 KiB of floats
  auto* sa = static_cast<uma_stream>(a_);
  auto* sb = static_cast<uma_stream>(b_);
  void* p = nullptr;
  ASSERT_EQ(uma_malloc(alloc_, n * sizeof(float), 0, sa, &p), UMA_OK) << uma_last_error();
  // About half a second of spinning at GPU clocks (~1.5-2 GHz), then p is written on A.
  test::spin_then_fill_on_device(static_cast<float*>(p), n, 1.0f, 1'000'000'000LL, a_);
  ASSERT_EQ(uma_free(alloc_, p, n * sizeof(float), 0, sa), UMA_OK);
  void* q = nullptr;
  ASSERT_EQ(uma_malloc(alloc_, n * sizeof(float), 0, sb, &q), UMA_OK);
  EXPECT_NE(q, p) << "reused on stream B while the kernel on stream A still writes it";
  test::fill_on_device(static_cast<float*>(q), n, 2.0f, b_);
  test::stream_synchronize(b_);
  test::stream_synchronize(a_);
  EXPECT_EQ(test::sum_on_device(static_cast<const float*>(p), n), static_cast<double>(n));
  EXPECT_EQ(test::sum_on_device(static_cast<const float*>(q), n), 2.0 * n);
  void* r = nullptr;
  ASSERT_EQ(uma_malloc(alloc_, n * sizeof(float), 0, sb, &r), UMA_OK);
  EXPECT_EQ(r, p) << "the event completed: the block may move to stream B";
  uma_stats s{};
  s.struct_size = sizeof s;
  ASSERT_EQ(uma_get_stats(alloc_, &s), UMA_OK);
  EXPECT_EQ(s.cache_blocks_in_use, 2u);
  EXPECT_EQ(uma_free(alloc_, q, 0, 0, sb), UMA_OK);
  EXPECT_EQ(uma_free(alloc_, r, 0, 0, sb), UMA_OK);
}

TEST_F(gpu_c_abi, EveryBlockIsManagedMemoryTheAllocatorCounts) {
  std::vector<void*> blocks;
  std::size_t requested = 0;
  for (std::size_t bytes : {512u, 70000u, 1u << 20, 5u << 20}) {
    void* p = nullptr;
    ASSERT_EQ(uma_malloc(alloc_, bytes, 0, static_cast<uma_stream>(a_), &p), UMA_OK);
    test::fill_on_device(static_cast<float*>(p), bytes / sizeof(float), 3.0f, a_);
    blocks.push_back(p);
    requested += bytes;
  }
  test::stream_synchronize(a_);
  uma_stats s{};
  s.struct_size = sizeof s;
  ASSERT_EQ(uma_get_stats(alloc_, &s), UMA_OK);
  EXPECT_EQ(s.cache_requested_bytes, requested);
  // Every live byte is a block's, but for alignment: a slab is page-aligned (a block's pages
  // are its own, for range plans), and CUDA guarantees 256 B, so each of the four slabs (one
  // per size class here) is charged up to a page more than its blocks.
  const std::uint64_t in_blocks = s.cache_in_use_bytes + s.cache_free_bytes;
  EXPECT_GE(s.live_bytes, in_blocks);
  EXPECT_LT(s.live_bytes - in_blocks, 4u * 4096u);
  for (void* p : blocks)
    EXPECT_EQ(uma_free(alloc_, p, 0, 0, static_cast<uma_stream>(a_)), UMA_OK);
}

TEST_F(gpu_c_abi, APlanOnABlockChargesItsPagesAndItsDataIsOnTheDevice) {
  constexpr std::size_t n = 1 << 20;  // 4 MiB of floats
  void* p = nullptr;
  ASSERT_EQ(uma_malloc(alloc_, n * sizeof(float), 0, nullptr, &p), UMA_OK) << uma_last_error();
  test::fill_on_device(static_cast<float*>(p), n, 1.0f, nullptr);
  test::device_synchronize();
  ASSERT_EQ(uma_set_device_budget(alloc_, 0, 64u << 20), UMA_OK) << uma_last_error();
  uma_range r{p, n * sizeof(float)};
  uma_plan_options o;
  uma_plan_options_init(&o);
  o.policy = UMA_RESIDENCY_MIGRATE;
  o.wait_complete = 1;
  uma_plan_result out{};
  out.struct_size = sizeof out;
  ASSERT_EQ(uma_will_access(alloc_, &r, 1, &o, &out), UMA_OK) << uma_last_error();
  EXPECT_EQ(out.to_device_bytes, n * sizeof(float));
  EXPECT_EQ(test::sum_on_device(static_cast<const float*>(p), n), static_cast<double>(n));
  uma_residency_report rep{};
  rep.struct_size = sizeof rep;
  ASSERT_EQ(uma_get_residency(alloc_, &rep), UMA_OK);
  EXPECT_EQ(rep.devices[0].resident_bytes, n * sizeof(float));  // the block, not its slab
  EXPECT_EQ(uma_done_with(alloc_, &r, 1), UMA_OK);
  EXPECT_EQ(uma_dead(alloc_, &r, 1, nullptr), UMA_OK);
  EXPECT_EQ(uma_free(alloc_, p, 0, 0, nullptr), UMA_OK);
}

}  // namespace
}  // namespace uma
