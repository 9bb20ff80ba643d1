// The migration ledger on the GPU (issue 15): CUPTI's unified-memory counters, attributed to
// uma's regions, checked against uma's own account of its moves. Dead data moves nothing back
// (both halves of the ledger say 0 bytes device -> host), an evicted migrate region moves its
// bytes back (both halves say so), and a placement is an explicit prefetch in CUPTI's terms.
// A range's plan moves its pages only, and a kernel reading them faults nothing in (issue 25).
// Regions are 64 MiB; the whole test stays far below the card's memory.

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include <uma/actors/client.hpp>
#include <uma/sys/cuda_backend.hpp>
#include "support/actor_fixture.hpp"
#include "support/cuda_kernels.hpp"

namespace uma {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t region_bytes = 64 * MiB;
/// The driver moves whole pages and groups; a region's transfer is its bytes, give or take the
/// pages the fill left where they were. 90% either way is far from "nothing moved".
constexpr double agree = 0.9;

/// What the driver counted between `before` and `after`.
driver_ledger since(driver_ledger after, const driver_ledger& before) {
  after.to_device_bytes -= before.to_device_bytes;
  after.prefetched_to_device_bytes -= before.prefetched_to_device_bytes;
  after.to_host_bytes -= before.to_host_bytes;
  after.prefetched_to_host_bytes -= before.prefetched_to_host_bytes;
  after.cpu_page_faults -= before.cpu_page_faults;
  after.gpu_page_faults -= before.gpu_page_faults;
  return after;
}

class gpu_ledger : public test::actor_fixture {
 protected:
  void SetUp() override {
    const auto probe = probe_cuda();
    if (!probe.usable)
      GTEST_SKIP() << "no usable CUDA device: " << probe.reason;
    gpu_ = make_client(
        {.backend = {.instance = make_backend(backend_choice::cuda), .driver_counters = true},
         .memory = {.quota_bytes = std::uint64_t{1} << 30}});
    const auto r = gpu_->residency();
    std::printf("driver counters: %s\n", r.driver_counters.c_str());
    ASSERT_TRUE(r.driver_counters_on) << r.driver_counters;
    gpu_->device_budget(0, 2 * region_bytes);
  }
  void TearDown() override { gpu_.reset(); }

  /// A region labelled `label`, filled on the device and then resident on the host only.
  ManagedRef<float> on_host(const std::string& label, float value) {
    auto ref = gpu_->allocate<float>(region_bytes / sizeof(float), {.label = label});
    test::fill_on_device(ref.data(), ref.size(), value, nullptr);
    test::device_synchronize();
    gpu_->prefetch(ref, location::host(), {}, completion::complete);
    test::device_synchronize();
    return ref;
  }
  void settle() {
    (void)gpu_->flush();
    test::device_synchronize();
  }
  label_residency ledger_of(const std::string& label) {
    for (auto& l : gpu_->residency().labels)
      if (l.label == label)
        return l;
    return {.label = label};
  }
  void plan_write(const ManagedRef<float>& ref) {
    (void)gpu_->will_access({client::erase(ref)}, 0, access_mode::write, residency_policy::migrate,
                            {}, completion::complete);
  }
  static void print(const char* what, const driver_ledger& d) {
    std::printf(
        "%s: CUPTI %.1f MiB in (%.1f by prefetch), %.1f MiB out (%.1f by prefetch), "
        "%llu CPU faults, %llu GPU fault groups\n",
        what, static_cast<double>(d.to_device_bytes) / MiB,
        static_cast<double>(d.prefetched_to_device_bytes) / MiB,
        static_cast<double>(d.to_host_bytes) / MiB,
        static_cast<double>(d.prefetched_to_host_bytes) / MiB,
        static_cast<unsigned long long>(d.cpu_page_faults),
        static_cast<unsigned long long>(d.gpu_page_faults));
  }

  std::unique_ptr<client> gpu_;
};

TEST_F(gpu_ledger, DeadDataMovesNothingBackAndBothHalvesOfTheLedgerSaySo) {
  auto a = on_host("dead", 1.0f);
  settle();
  const auto before = ledger_of("dead").driver;  // the fill's moves
  plan_write(a);
  test::fill_on_device(a.data(), a.size(), 2.0f, nullptr);
  test::device_synchronize();
  (void)gpu_->done_with({client::erase(a)});
  const auto r = gpu_->dead({client::erase(a)});
  EXPECT_EQ(r.discarded_bytes, region_bytes);
  settle();
  // The host writes the region again (new contents): nothing may come back for it.
  a.data()[0] = 3.0f;
  a.data()[a.size() - 1] = 3.0f;
  settle();
  const auto after = ledger_of("dead");
  const auto d = since(after.driver, before);
  print("dead region, after the fill", d);
  EXPECT_EQ(after.moves.to_host_bytes, 0u);
  EXPECT_EQ(after.moves.discarded_bytes, region_bytes);
  EXPECT_EQ(d.to_host_bytes, 0u) << "the driver moved bytes of dead data back";
  EXPECT_GE(static_cast<double>(d.prefetched_to_device_bytes), agree * region_bytes);
  EXPECT_EQ(after.moves.to_device_bytes, region_bytes);
}

TEST_F(gpu_ledger, AnEvictedMigrateRegionMovesItsBytesBackAndBothHalvesAgree) {
  auto b = on_host("evicted", 1.0f);
  auto c = on_host("pushing", 2.0f);
  auto d = on_host("pushing", 3.0f);
  settle();
  const auto before = ledger_of("evicted").driver;
  plan_write(b);
  test::fill_on_device(b.data(), b.size(), 4.0f, nullptr);
  test::device_synchronize();
  (void)gpu_->done_with({client::erase(b)});
  // Two more regions fill the budget: b, least recently used and written, goes back.
  const auto pushed = gpu_->will_access({client::erase(c), client::erase(d)}, 0, access_mode::read,
                                        residency_policy::migrate, {}, completion::complete);
  EXPECT_EQ(pushed.to_host_bytes, region_bytes);
  settle();
  const auto after = ledger_of("evicted");
  const auto moved = since(after.driver, before);
  print("evicted region, after the fill", moved);
  EXPECT_EQ(after.moves.to_host_bytes, region_bytes);
  EXPECT_GE(static_cast<double>(moved.to_host_bytes), agree * region_bytes);
  EXPECT_LE(static_cast<double>(moved.to_host_bytes), region_bytes / agree);
  EXPECT_GE(static_cast<double>(moved.prefetched_to_host_bytes), agree * region_bytes);
  EXPECT_GE(static_cast<double>(moved.prefetched_to_device_bytes), agree * region_bytes);
  EXPECT_DOUBLE_EQ(test::sum_on_device(b.data(), b.size()), 4.0 * b.size());  // came back whole
  const auto report = gpu_->residency();
  print("all regions", report.driver_totals);
  std::printf("unattributed: %.1f MiB in, %.1f MiB out; %llu records dropped\n",
              static_cast<double>(report.driver_unattributed.to_device_bytes) / MiB,
              static_cast<double>(report.driver_unattributed.to_host_bytes) / MiB,
              static_cast<unsigned long long>(report.driver_records_dropped));
  EXPECT_EQ(report.driver_records_dropped, 0u);
}

TEST_F(gpu_ledger, ARangesPlanMovesItsPagesOnlyAndAKernelOnThemFaultsNothingIn) {
  auto a = on_host("range", 1.0f);
  settle();
  const auto before = ledger_of("range").driver;
  constexpr std::size_t planned = 8 * MiB;  // an eighth of the region, by address (issue 25)
  access_plan_request plan;
  plan.ranges = {{reinterpret_cast<std::uintptr_t>(a.data()), planned}};
  plan.policy = residency_policy::migrate;
  plan.reply_when = completion::complete;
  EXPECT_EQ(gpu_->will_access(std::move(plan)).to_device_bytes, planned);
  const auto floats = planned / sizeof(float);
  EXPECT_DOUBLE_EQ(test::sum_on_device(a.data(), floats), 1.0 * static_cast<double>(floats));
  settle();
  const auto d = since(ledger_of("range").driver, before);
  print("an 8 MiB range of a 64 MiB region, then a kernel reading it", d);
  EXPECT_GE(static_cast<double>(d.prefetched_to_device_bytes), agree * planned);
  EXPECT_LE(static_cast<double>(d.to_device_bytes), planned / agree)
      << "more than the planned range came to the device";
  EXPECT_LE(static_cast<double>(d.to_device_bytes - d.prefetched_to_device_bytes), 0.01 * planned)
      << "the kernel faulted planned data in";
  const auto report = gpu_->residency();
  EXPECT_EQ(report.devices[0].resident, planned);
  EXPECT_EQ(report.unplanned_bytes, region_bytes - planned);
}

TEST_F(gpu_ledger, TheSnapshotCarriesEachRegionsDriverCountsAndStatsTheTotals) {
  auto e = on_host("snap", 1.0f);
  plan_write(e);
  settle();
  const auto snap = gpu_->snapshot();
  ASSERT_EQ(snap.regions.size(), 1u);
  ASSERT_TRUE(snap.regions[0].residency);
  const auto& r = *snap.regions[0].residency;
  EXPECT_EQ(r.device, 0);
  EXPECT_EQ(r.policy, "migrate");
  // The fill (device), the prefetch home (host), the plan (device again).
  EXPECT_GE(static_cast<double>(r.driver.to_host_bytes), agree * region_bytes);
  EXPECT_GE(static_cast<double>(r.driver.prefetched_to_device_bytes), agree * region_bytes);
  const auto stats = gpu_->stats();  // as of the snapshot's take-in
  EXPECT_GE(stats.driver_to_host_bytes, r.driver.to_host_bytes);
  EXPECT_EQ(stats.resident_bytes, region_bytes);
}

}  // namespace
}  // namespace uma
