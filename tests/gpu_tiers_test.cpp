// The tiers on the CUDA backend (issue 39, docs/design.md "Tiers"): pinned host memory and device
// memory that the allocator owns, and copies between them on the copy engines, checked by a
// kernel. Labelled `gpu`; every test skips with a reason when no CUDA device is usable. Sizes stay
// far below the card's memory (../shared/GPU.md).

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <uma/memory/copy.hpp>
#include <uma/memory/pin.hpp>
#include <uma/sys/cuda_backend.hpp>

#include "support/cuda_kernels.hpp"
#include "support/gpu_fixture.hpp"

namespace uma {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

class gpu_tiers : public test::gpu_fixture {
 protected:
  /// Fills pinned host memory with the pattern seeded with `seed`.
  static void fill_pattern(const byte_ref& host, std::uint32_t seed) {
    auto pin = host.as<std::uint32_t>().pin();
    for (std::size_t i = 0; i < pin.size(); ++i)
      pin[i] = test::pattern_at(i, seed);
  }
};

TEST_F(gpu_tiers, TierMemoryIsWhatItSaysToTheRuntime) {
  auto host = gpu_->allocate<std::byte>(4 * MiB, {.kind = memory_kind::pinned_host});
  auto device = gpu_->allocate<std::byte>(4 * MiB, {.kind = memory_kind::cuda_device});
  EXPECT_EQ(cuda_->kind_of(host.data()), memory_kind::pinned_host);
  EXPECT_EQ(cuda_->kind_of(device.data()), memory_kind::cuda_device);
  const auto s = gpu_->stats();
  EXPECT_EQ(s.host_tier_bytes, 4 * MiB);
  EXPECT_EQ(s.device_tier_bytes, 4 * MiB);
}

// The shape of a streamed model's layers: chunks of the host tier copied through two staging
// buffers on a copy stream, each checked by a kernel on a compute stream that waits for its copy,
// the next copy into a buffer waiting for the kernel that read it. Every byte must arrive exact.
TEST_F(gpu_tiers, DoubleBufferedCopiesKeepEveryByteExactUnderAKernelThatChecksIt) {
  constexpr std::size_t chunk = 64 * MiB;
  constexpr std::size_t chunks = 12;
  constexpr std::size_t words = chunk / sizeof(std::uint32_t);
  gpu_->device_budget(0, 512 * MiB);
  std::vector<byte_ref> layers;
  for (std::size_t k = 0; k < chunks; ++k) {
    layers.push_back(
        client::erase(gpu_->allocate<std::byte>(chunk, {.kind = memory_kind::pinned_host})));
    fill_pattern(layers.back(), static_cast<std::uint32_t>(k * 7919));
  }
  byte_ref staging[2] = {
      client::erase(gpu_->allocate<std::byte>(chunk, {.kind = memory_kind::cuda_device})),
      client::erase(gpu_->allocate<std::byte>(chunk, {.kind = memory_kind::cuda_device}))};
  EXPECT_EQ(gpu_->residency().devices.at(0).held, 2 * chunk);
  auto counter = gpu_->allocate<unsigned long long>(1, {.kind = memory_kind::cuda_device});
  auto zero = gpu_->allocate<unsigned long long>(1, {.kind = memory_kind::pinned_host});
  *zero.pin().data() = 0;
  void* copies = test::create_stream();
  void* compute = test::create_stream();
  copy(client::erase(counter), client::erase(zero), stream_view{compute});
  std::vector<void*> freed(2, nullptr);  // the event after the kernel that last read a buffer
  std::vector<void*> events;
  for (int pass = 0; pass < 3; ++pass) {
    for (std::size_t k = 0; k < chunks; ++k) {
      const auto b = k % 2;
      if (freed[b] != nullptr)
        test::wait_event(copies, freed[b]);
      copy(staging[b], layers[k], stream_view{copies});
      void* arrived = test::record_event(copies);
      test::wait_event(compute, arrived);
      test::check_pattern_on_device(reinterpret_cast<const std::uint32_t*>(staging[b].data()),
                                    words, static_cast<std::uint32_t>(k * 7919), counter.data(),
                                    compute);
      freed[b] = test::record_event(compute);
      events.push_back(arrived);
      events.push_back(freed[b]);
    }
  }
  copy(client::erase(zero), client::erase(counter), stream_view{compute});
  test::stream_synchronize(compute);
  test::stream_synchronize(copies);
  EXPECT_EQ(*zero.pin().data(), 0u) << "bytes that arrived wrong";
  const auto s = gpu_->stats();
  EXPECT_EQ(s.copy_to_device_bytes, 3 * chunks * chunk + sizeof(unsigned long long));
  EXPECT_EQ(s.copy_to_host_bytes, sizeof(unsigned long long));
  for (auto* e : events)
    test::destroy_event(e);
  test::destroy_stream(copies);
  test::destroy_stream(compute);
}

TEST_F(gpu_tiers, AStopFreesTierMemoryOnTheDevice) {
  auto host =
      client::erase(gpu_->allocate<std::byte>(64 * MiB, {.kind = memory_kind::pinned_host}));
  auto device =
      client::erase(gpu_->allocate<std::byte>(64 * MiB, {.kind = memory_kind::cuda_device}));
  const auto before = cuda_->counters();
  const auto report = gpu_->stop();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->stop.regions_freed, 2u);
  EXPECT_EQ(cuda_->counters().tier_frees, before.tier_frees + 2);
  EXPECT_EQ(cuda_->counters().bad_frees, before.bad_frees);
  EXPECT_FALSE(host.valid());
}

}  // namespace
}  // namespace uma
