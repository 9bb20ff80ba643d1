// Residency on the GPU (issue 15): each placement policy's effect on the device's memory, seen
// with cudaMemGetInfo (test::device_used_bytes) and cudaMemRangeGetAttribute, against uma's
// account and ledger. Regions are 256 MiB; the whole test stays far below the card's memory.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <uma/actors/access_sequence.hpp>
#include <uma/actors/client.hpp>
#include <uma/sys/cuda_backend.hpp>
#include "support/actor_fixture.hpp"
#include "support/cuda_kernels.hpp"

namespace uma {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t region_bytes = 256 * MiB;
/// cudaMemGetInfo moves in 2 MiB pages and other bookkeeping; a move of 256 MiB is unmistakable.
constexpr double slack = 24.0 * MiB;

class gpu_residency : public test::actor_fixture {
 protected:
  void SetUp() override {
    const auto probe = probe_cuda();
    if (!probe.usable)
      GTEST_SKIP() << "no usable CUDA device: " << probe.reason;
    gpu_ = make_client({.backend = make_backend(backend_choice::cuda), .quota_bytes = 4ull << 30});
  }
  void TearDown() override { gpu_.reset(); }

  /// A region of `region_bytes` filled with `value` and resident on the host only.
  ManagedRef<float> on_host(float value) {
    auto ref = gpu_->allocate<float>(region_bytes / sizeof(float));
    test::fill_on_device(ref.data(), ref.size(), value, nullptr);
    test::device_synchronize();
    gpu_->prefetch(ref, location::host(), {}, completion::complete);
    test::device_synchronize();
    return ref;
  }
  /// Device memory in use once every lane's queued move and the device are done.
  double used() {
    (void)gpu_->flush();
    test::device_synchronize();
    return static_cast<double>(test::device_used_bytes());
  }
  residency_result plan(const ManagedRef<float>& ref, residency_policy p,
                        access_mode m = access_mode::read) {
    return gpu_->will_access({client::erase(ref)}, 0, m, p, {}, completion::complete);
  }
  void done(const ManagedRef<float>& ref) { (void)gpu_->done_with({client::erase(ref)}); }

  std::unique_ptr<client> gpu_;
};

TEST_F(gpu_residency, MigratePlacesOnTheDeviceAndEvictsTheLeastRecentlyUsedBackToTheHost) {
  gpu_->device_budget(0, 2 * region_bytes);
  auto a = on_host(1.0f), b = on_host(2.0f), c = on_host(3.0f);
  const double base = used();
  EXPECT_EQ(plan(a, residency_policy::migrate).to_device_bytes, region_bytes);
  EXPECT_NEAR(used() - base, 1.0 * region_bytes, slack);
  EXPECT_EQ(gpu_->attributes(a).last_prefetch_location, location::device(0));
  (void)plan(b, residency_policy::migrate);
  EXPECT_NEAR(used() - base, 2.0 * region_bytes, slack);
  done(a);
  done(b);
  const auto r = plan(c, residency_policy::migrate);  // a is the least recently used: it goes
  EXPECT_EQ(r.to_host_bytes, region_bytes);
  EXPECT_NEAR(used() - base, 2.0 * region_bytes, slack);  // a out, c in: the budget holds
  EXPECT_EQ(gpu_->attributes(a).last_prefetch_location, location::host());
  EXPECT_DOUBLE_EQ(test::sum_on_device(a.data(), a.size()), 1.0 * a.size());  // contents intact
  const auto report = gpu_->residency();
  EXPECT_EQ(report.totals.to_device_bytes, 3 * region_bytes);
  EXPECT_EQ(report.totals.to_host_bytes, region_bytes);
  EXPECT_EQ(report.devices.at(0).resident, 2 * region_bytes);
}

TEST_F(gpu_residency, ReadMostlyEvictionDropsTheDeviceCopyAndMovesNothingBack) {
  gpu_->device_budget(0, region_bytes);
  auto a = on_host(1.0f), b = on_host(2.0f);
  const double base = used();
  (void)plan(a, residency_policy::read_mostly);
  EXPECT_NEAR(used() - base, 1.0 * region_bytes, slack);  // the replica counts as resident
  EXPECT_TRUE(gpu_->attributes(a).read_mostly);
  done(a);
  const auto r = plan(b, residency_policy::read_mostly);
  EXPECT_EQ(r.dropped_bytes, region_bytes);
  EXPECT_EQ(r.to_host_bytes, 0u);
  EXPECT_NEAR(used() - base, 1.0 * region_bytes, slack);  // a's copy gone, b's here
  const auto attrs = gpu_->attributes(a);
  EXPECT_FALSE(attrs.read_mostly);
  EXPECT_EQ(attrs.preferred_location, std::nullopt);  // the collapse's advice is undone
  EXPECT_DOUBLE_EQ(test::sum_on_device(a.data(), a.size()), 1.0 * a.size());
  EXPECT_EQ(gpu_->residency().totals.to_host_bytes, 0u);
}

TEST_F(gpu_residency, RemoteMapLeavesDeviceMemoryAloneAndIsAdvisedOnce) {
  gpu_->device_budget(0, 64 * MiB);  // smaller than the region: a mapping needs no budget
  auto a = on_host(2.0f);
  const double base = used();
  EXPECT_EQ(plan(a, residency_policy::remote_map).mapped_bytes, region_bytes);
  EXPECT_DOUBLE_EQ(test::sum_on_device(a.data(), a.size()), 2.0 * a.size());  // read remotely
  EXPECT_NEAR(used() - base, 0.0, slack);
  const auto attrs = gpu_->attributes(a);
  EXPECT_EQ(attrs.preferred_location, location::host());
  EXPECT_EQ(attrs.accessed_by, std::vector<location>{location::device(0)});
  done(a);
  EXPECT_EQ(plan(a, residency_policy::remote_map).mapped_bytes, 0u);  // mapped already
  done(a);
  // Placed after all: the mapping's advice goes first, then the region moves.
  gpu_->device_budget(0, region_bytes);
  EXPECT_EQ(plan(a, residency_policy::migrate).to_device_bytes, region_bytes);
  EXPECT_EQ(gpu_->attributes(a).accessed_by, std::vector<location>{});
  EXPECT_EQ(gpu_->attributes(a).preferred_location, std::nullopt);
  EXPECT_NEAR(used() - base, 1.0 * region_bytes, slack);
}

TEST_F(gpu_residency, DeadDataIsDiscardedAndNothingMovesBack) {
  gpu_->device_budget(0, 2 * region_bytes);
  auto a = on_host(1.0f);
  const double base = used();
  (void)plan(a, residency_policy::migrate, access_mode::write);
  test::fill_on_device(a.data(), a.size(), 5.0f, nullptr);
  const double placed = used() - base;
  EXPECT_NEAR(placed, 1.0 * region_bytes, slack);
  done(a);
  const auto r = gpu_->dead({client::erase(a)});
  EXPECT_EQ(r.discarded_bytes, region_bytes);
  EXPECT_EQ(r.to_host_bytes, 0u);
  const double after = used() - base;
  std::printf("dead: device memory in use %.1f MiB after placement, %.1f MiB after discard\n",
              placed / MiB, after / MiB);
  const auto report = gpu_->residency();
  EXPECT_EQ(report.totals.to_host_bytes, 0u);
  EXPECT_EQ(report.devices.at(0).resident, 0u);
}

TEST_F(gpu_residency, APipelinedSequenceKeepsTheDeviceWithinTheBudgetPlusOneStep) {
  constexpr std::size_t steps = 6, step_bytes = 64 * MiB, budget = 3 * step_bytes;
  gpu_->device_budget(0, budget);
  std::vector<ManagedRef<float>> data;
  std::vector<access_step> plan_steps;
  for (std::size_t i = 0; i < steps; ++i) {
    data.push_back(gpu_->allocate<float>(step_bytes / sizeof(float)));
    test::fill_on_device(data.back().data(), data.back().size(), 1.0f, nullptr);
    test::device_synchronize();
    gpu_->prefetch(data.back(), location::host(), {}, completion::complete);
    access_step s;
    s.refs.push_back(client::erase(data.back()));
    s.policy = residency_policy::migrate;
    s.mode = access_mode::write;
    plan_steps.push_back(std::move(s));
  }
  const double base = used();
  double peak = 0;
  access_sequence seq(*gpu_, plan_steps);
  for (std::size_t i = 0; i < 3 * steps; ++i) {
    (void)seq.begin(i);
    auto& d = data[i % steps];
    EXPECT_EQ(gpu_->attributes(d).last_prefetch_location, location::device(0)) << "step " << i;
    test::add_on_device(d.data(), d.size(), 1.0f, nullptr);
    test::device_synchronize();
    peak = std::max(peak, static_cast<double>(test::device_used_bytes()) - base);
  }
  seq.finish();
  EXPECT_LE(peak, static_cast<double>(budget + step_bytes) + slack);
  EXPECT_LE(gpu_->residency().devices.at(0).peak, budget);
  for (auto& d : data)
    EXPECT_DOUBLE_EQ(test::sum_on_device(d.data(), d.size()), 4.0 * d.size());  // 1 + 3 passes
  EXPECT_EQ(seq.refused_ahead(), 0u);
}

}  // namespace
}  // namespace uma
