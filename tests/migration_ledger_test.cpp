// The migration ledger (issue 15, docs/residency.md): the driver's unified-memory counters
// attributed to regions by address, per region, per label and in all; uma's own moves per label;
// how the allocator reports both (residency report, snapshot, stats, Prometheus). On the host
// backend a scripted subscription stands in for CUPTI; tests/gpu_residency_test.cpp checks the
// real one on a GPU.

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <uma/actors/metrics/prometheus_text.hpp>
#include <uma/memory/migration_ledger.hpp>
#include <uma/memory/residency_account.hpp>
#include <uma/sys/fault_injecting_backend.hpp>

#include "support/actor_fixture.hpp"

namespace uma {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

um_counter_record move(um_counter_kind k, std::uint64_t address, std::uint64_t bytes,
                       bool prefetch = false) {
  return {k, prefetch, address, bytes};
}

// -- migration_ledger: attribution ---------------------------------------------------------------

class ledger : public ::testing::Test {
 protected:
  std::vector<std::uint64_t> asked_;
  migration_ledger ledger_{[this](std::uint64_t id) {
    asked_.push_back(id);
    return id == 1 ? std::string("weights") : std::string("activations");
  }};
  // Region 1 at [0x1000, 0x3000), region 2 at [0x3000, 0x4000), region 3 at [0x8000, 0x9000).
  std::vector<ledger_range> ranges_{{0x1000, 0x3000, 1}, {0x3000, 0x4000, 2}, {0x8000, 0x9000, 3}};
};

TEST_F(ledger, AMoveIsSplitOverTheRegionsItOverlapsAndTheRestIsUnattributed) {
  // [0x2000, 0x5000): 0x1000 in region 1, 0x1000 in region 2, 0x1000 in no region.
  const auto r = move(um_counter_kind::to_device_bytes, 0x2000, 0x3000, true);
  ledger_.add({&r, 1}, ranges_);
  ASSERT_NE(ledger_.region(1), nullptr);
  EXPECT_EQ(ledger_.region(1)->to_device_bytes, 0x1000u);
  EXPECT_EQ(ledger_.region(1)->prefetched_to_device_bytes, 0x1000u);
  EXPECT_EQ(ledger_.region(2)->to_device_bytes, 0x1000u);
  EXPECT_EQ(ledger_.region(3), nullptr);  // not touched
  EXPECT_EQ(ledger_.unattributed().to_device_bytes, 0x1000u);
  EXPECT_EQ(ledger_.totals().to_device_bytes, 0x3000u);
  EXPECT_EQ(ledger_.totals().prefetched_to_device_bytes, 0x3000u);
}

TEST_F(ledger, ADriverMoveIsNotCountedAsAPrefetchAndEachDirectionKeepsItsOwn) {
  const std::vector<um_counter_record> records{
      move(um_counter_kind::to_host_bytes, 0x8000, 0x800),
      move(um_counter_kind::to_device_bytes, 0x8800, 0x800, true)};
  ledger_.add(records, ranges_);
  const auto* r3 = ledger_.region(3);
  ASSERT_NE(r3, nullptr);
  EXPECT_EQ(r3->to_host_bytes, 0x800u);
  EXPECT_EQ(r3->prefetched_to_host_bytes, 0u);
  EXPECT_EQ(r3->to_device_bytes, 0x800u);
  EXPECT_EQ(r3->prefetched_to_device_bytes, 0x800u);
  EXPECT_EQ(ledger_.unattributed(), driver_ledger{});
}

TEST_F(ledger, AFaultGoesToTheRegionHoldingItsAddressOrIsUnattributed) {
  const std::vector<um_counter_record> records{
      {um_counter_kind::gpu_page_fault, false, 0x3800, 3},  // 3 fault groups in region 2
      {um_counter_kind::cpu_page_fault, false, 0x1000, 1},  // the first byte of region 1
      {um_counter_kind::cpu_page_fault, false, 0x4000, 1},  // one past region 2: nobody's
      {um_counter_kind::throttling, false, 0x8fff, 0},      // the last byte of region 3
  };
  ledger_.add(records, ranges_);
  EXPECT_EQ(ledger_.region(2)->gpu_page_faults, 3u);
  EXPECT_EQ(ledger_.region(1)->cpu_page_faults, 1u);
  EXPECT_EQ(ledger_.region(3)->throttled, 1u);
  EXPECT_EQ(ledger_.unattributed().cpu_page_faults, 1u);
  EXPECT_EQ(ledger_.totals().cpu_page_faults, 2u);
  EXPECT_EQ(ledger_.totals().gpu_page_faults, 3u);
}

TEST_F(ledger, LabelSumsOutliveTheirRegionsAndEachLabelIsAskedForOnce) {
  const std::vector<um_counter_record> records{
      move(um_counter_kind::to_device_bytes, 0x1000, 0x2000),
      move(um_counter_kind::to_device_bytes, 0x1000, 0x1000),
      move(um_counter_kind::thrashing, 0x3000, 0x1000),
      move(um_counter_kind::remote_map, 0x8000, 0x1000)};
  ledger_.add(records, ranges_);
  EXPECT_EQ(asked_, (std::vector<std::uint64_t>{1, 2, 3}));
  ledger_.forget(1);
  EXPECT_EQ(ledger_.region(1), nullptr);
  const auto& labels = ledger_.by_label();
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_EQ(labels.at("weights").to_device_bytes, 0x3000u);
  EXPECT_EQ(labels.at("activations").thrashing_bytes, 0x1000u);
  EXPECT_EQ(labels.at("activations").remote_map_bytes, 0x1000u);
  // A later record at region 1's old address belongs to nobody.
  ledger_.add(records, {ranges_.data() + 1, 2});
  EXPECT_EQ(ledger_.unattributed().to_device_bytes, 0x3000u);
  EXPECT_EQ(ledger_.by_label().at("weights").to_device_bytes, 0x3000u);
}

TEST_F(ledger, AByteRecordRunningPastTheAddressSpaceIsCutAtItsEnd) {
  const std::uint64_t top = ~std::uint64_t{0};
  const auto r = move(um_counter_kind::to_host_bytes, top - 0xff, 0x1000);
  ledger_.add({&r, 1}, ranges_);
  EXPECT_EQ(ledger_.totals().to_host_bytes, 0xffu);
  EXPECT_EQ(ledger_.unattributed().to_host_bytes, 0xffu);
}

// -- the account's half: uma's moves per label ---------------------------------------------------

TEST(residency_labels, TheAccountSumsItsMovesPerLabelAndKeepsAFreedRegionsShare) {
  residency_account account({64 * MiB});
  account.set_budget(0, 8 * MiB);
  const std::vector<planned_region> first{{1, 4 * MiB, residency_policy::migrate, "kv"},
                                          {2, 4 * MiB, residency_policy::migrate, "weights"}};
  static_cast<void>(account.will_access(first, 0, access_mode::write));
  account.done_with(std::vector<std::uint64_t>{1, 2});
  // Region 3 pushes region 1 (least recently used) out: 4 MiB back to the host, under "kv".
  const std::vector<planned_region> next{{3, 4 * MiB, residency_policy::migrate, "kv"}};
  static_cast<void>(account.will_access(next, 0, access_mode::read));
  account.forget(1);
  const auto labels = account.by_label();
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_EQ(labels.at("kv").to_device_bytes, 8 * MiB);
  EXPECT_EQ(labels.at("kv").to_host_bytes, 4 * MiB);
  EXPECT_EQ(labels.at("weights").to_device_bytes, 4 * MiB);
  EXPECT_EQ(account.totals().to_device_bytes, 12 * MiB);
  EXPECT_EQ(account.totals().to_host_bytes, 4 * MiB);
  EXPECT_EQ(account.resident(), 8 * MiB);
}

TEST(residency_labels, ALaterPlanNamingAnotherLabelRelabelsAndTheOldKeepsItsShare) {
  residency_account account({64 * MiB});
  account.set_budget(0, 8 * MiB);
  const std::vector<planned_region> first{{1, 4 * MiB, residency_policy::migrate, "first"}};
  static_cast<void>(account.will_access(first, 0, access_mode::read));
  account.done_with(std::vector<std::uint64_t>{1});
  // An empty label keeps the region's; a refused plan relabels nothing.
  const std::vector<planned_region> same{{1, 4 * MiB, residency_policy::migrate, ""}};
  static_cast<void>(account.will_access(same, 0, access_mode::read));
  account.done_with(std::vector<std::uint64_t>{1});
  const std::vector<planned_region> refused{{1, 4 * MiB, residency_policy::migrate, "second"},
                                            {2, 8 * MiB, residency_policy::migrate, "other"}};
  EXPECT_THROW(static_cast<void>(account.will_access(refused, 0, access_mode::read)), error);
  EXPECT_EQ(account.by_label().size(), 1u);
  // Evicted, then placed under its new label: the eviction stays with the old one.
  const std::vector<planned_region> push{{3, 8 * MiB, residency_policy::migrate, "push"}};
  static_cast<void>(account.will_access(push, 0, access_mode::write));
  account.done_with(std::vector<std::uint64_t>{3});
  const std::vector<planned_region> next{{1, 4 * MiB, residency_policy::migrate, "second"}};
  static_cast<void>(account.will_access(next, 0, access_mode::read));
  const auto labels = account.by_label();
  ASSERT_EQ(labels.size(), 3u);
  EXPECT_EQ(labels.at("first").to_device_bytes, 4 * MiB);
  EXPECT_EQ(labels.at("first").evictions, 1u);
  EXPECT_EQ(labels.at("second").to_device_bytes, 4 * MiB);
  EXPECT_EQ(labels.at("second").placements, 1u);
  EXPECT_EQ(account.ledger(1)->placements, 2u);  // the region's own ledger keeps both
  account.forget(1);
  EXPECT_EQ(account.by_label().at("second").placements, 1u);
  EXPECT_EQ(account.by_label().at("first").placements, 1u);
}

// -- through the allocator -----------------------------------------------------------------------

/// What a test feeds the allocator as the driver's records.
struct driver_feed {
  std::mutex mutex;
  std::vector<um_counter_record> pending;
  std::uint64_t drains = 0;
};

class scripted_counters final : public um_counter_subscription {
 public:
  explicit scripted_counters(std::shared_ptr<driver_feed> feed) : feed_(std::move(feed)) {}
  std::vector<um_counter_record> drain() override {
    std::lock_guard lock(feed_->mutex);
    ++feed_->drains;
    return std::exchange(feed_->pending, {});
  }
  std::uint64_t dropped() const noexcept override { return 7; }
  std::string source() const override { return "scripted driver counters"; }

 private:
  std::shared_ptr<driver_feed> feed_;
};

class ledger_through_allocator : public test::actor_fixture {
 protected:
  ledger_through_allocator() {
    faulty_->provide_um_counters([feed = feed_] {
      return um_counter_source{std::make_unique<scripted_counters>(feed), {}};
    });
    auto c = host_config();
    c.backend.instance = faulty_;
    c.backend.driver_counters = true;
    uma_ = make_client(std::move(c));
  }

  void feed(const std::vector<um_counter_record>& records) {
    std::lock_guard lock(feed_->mutex);
    feed_->pending.insert(feed_->pending.end(), records.begin(), records.end());
  }

  static std::uint64_t address(const byte_ref& r) {
    return reinterpret_cast<std::uintptr_t>(r.range().ptr);
  }

  std::shared_ptr<driver_feed> feed_ = std::make_shared<driver_feed>();
  std::shared_ptr<fault_injecting_backend> faulty_ = std::make_shared<fault_injecting_backend>(
      std::make_shared<host_backend>(emulated_devices{1, 64 * MiB}));
};

TEST_F(ledger_through_allocator, DriverRecordsReachTheReportTheSnapshotAndStatsByRegionAndLabel) {
  auto weights = client::erase(uma_->allocate<std::byte>(MiB, {.label = "weights"}));
  auto scratch = client::erase(uma_->allocate<std::byte>(MiB, {.label = "scratch"}));
  static_cast<void>(uma_->will_access({weights}, 0, access_mode::read, residency_policy::migrate));
  feed({move(um_counter_kind::to_device_bytes, address(weights), MiB, true),
        move(um_counter_kind::to_host_bytes, address(scratch), MiB / 2),
        {um_counter_kind::gpu_page_fault, false, address(scratch) + 4096, 2},
        move(um_counter_kind::to_device_bytes, 64, 4096)});  // nobody's memory

  const auto report = uma_->residency();
  EXPECT_TRUE(report.driver_counters_on);
  EXPECT_EQ(report.driver_counters, "scripted driver counters");
  EXPECT_EQ(report.driver_totals.to_device_bytes, MiB + 4096);
  EXPECT_EQ(report.driver_unattributed.to_device_bytes, 4096u);
  EXPECT_EQ(report.driver_records_dropped, 7u);
  ASSERT_EQ(report.labels.size(), 2u);  // sorted by label
  EXPECT_EQ(report.labels[0].label, "scratch");
  EXPECT_EQ(report.labels[0].driver.to_host_bytes, MiB / 2);
  EXPECT_EQ(report.labels[0].driver.gpu_page_faults, 2u);
  EXPECT_EQ(report.labels[0].moves.to_device_bytes, 0u);  // never planned
  EXPECT_EQ(report.labels[1].label, "weights");
  EXPECT_EQ(report.labels[1].driver.prefetched_to_device_bytes, MiB);
  EXPECT_EQ(report.labels[1].moves.to_device_bytes, MiB);  // uma's own move, planned

  const auto snap = uma_->snapshot();
  ASSERT_EQ(snap.regions.size(), 2u);
  for (const auto& r : snap.regions) {
    ASSERT_TRUE(r.residency) << r.info.label;
    if (r.info.label == "weights") {
      EXPECT_EQ(r.residency->device, 0);
      EXPECT_EQ(r.residency->policy, "migrate");
      EXPECT_EQ(r.residency->moves.placements, 1u);
      EXPECT_EQ(r.residency->driver.to_device_bytes, MiB);
    } else {
      EXPECT_EQ(r.residency->device, -1);
      EXPECT_EQ(r.residency->policy, "none");
      EXPECT_EQ(r.residency->driver.to_host_bytes, MiB / 2);
    }
  }
  const auto stats = uma_->stats();
  EXPECT_EQ(stats.resident_bytes, MiB);
  EXPECT_EQ(stats.residency_to_device_bytes, MiB);
  EXPECT_EQ(stats.driver_to_device_bytes, MiB + 4096);
  EXPECT_EQ(stats.driver_to_host_bytes, MiB / 2);
  EXPECT_EQ(stats.driver_page_faults, 2u);
}

TEST_F(ledger_through_allocator, AFreedRegionsCountsStayWithItsLabel) {
  auto kv = client::erase(uma_->allocate<std::byte>(MiB, {.label = "kv"}));
  feed({move(um_counter_kind::to_device_bytes, address(kv), MiB)});
  static_cast<void>(uma_->residency());  // taken in while the region lives
  kv = {};
  static_cast<void>(uma_->flush());
  const auto report = uma_->residency();
  ASSERT_EQ(report.labels.size(), 1u);
  EXPECT_EQ(report.labels[0].label, "kv");
  EXPECT_EQ(report.labels[0].driver.to_device_bytes, MiB);
  EXPECT_EQ(report.driver_unattributed.to_device_bytes, 0u);
  EXPECT_TRUE(uma_->snapshot().regions.empty());
}

TEST_F(ledger_through_allocator, StatsDoNotAskTheDriverOnlyReportsAndSnapshotsDo) {
  const auto drains = [this] {
    std::lock_guard lock(feed_->mutex);
    return feed_->drains;
  };
  const auto before = drains();
  static_cast<void>(uma_->stats());
  EXPECT_EQ(drains(), before);
  static_cast<void>(uma_->residency());
  static_cast<void>(uma_->snapshot());
  EXPECT_EQ(drains(), before + 2);
}

TEST_F(ledger_through_allocator, OffByDefaultAndOnTheHostBackendTheReportSaysWhy) {
  auto off = one_device_config();
  const auto report_off = make_client(off)->residency();
  EXPECT_FALSE(report_off.driver_counters_on);
  EXPECT_NE(report_off.driver_counters.find("off"), std::string::npos)
      << report_off.driver_counters;

  auto asked = one_device_config();
  asked.backend.driver_counters = true;
  auto uma = make_client(asked);
  const auto r = uma->residency();
  EXPECT_FALSE(r.driver_counters_on);
  EXPECT_NE(r.driver_counters.find("unavailable: the host backend has no driver counters"),
            std::string::npos)
      << r.driver_counters;
  // Everything else works as before.
  auto ref = client::erase(uma->allocate<std::byte>(MiB));
  EXPECT_EQ(uma->will_access({ref}, 0, access_mode::read).to_device_bytes, MiB);
}

TEST(residency_prometheus, TheDriverFamiliesAppearWhileOnWithLabelsAndCauses) {
  metrics_snapshot s;
  s.allocator.backend = "cuda";
  residency_report r;
  r.devices.push_back({});
  r.driver_counters_on = true;
  r.driver_totals.to_device_bytes = 300;
  r.driver_totals.prefetched_to_device_bytes = 200;
  r.driver_totals.gpu_page_faults = 5;
  r.labels.push_back({"kv", {.to_host_bytes = 64}, {.to_device_bytes = 40}});
  s.residency = r;
  const auto text = to_prometheus(s);
  const auto has = [&text](const std::string& line) {
    return text.find(line + "\n") != std::string::npos;
  };
  const std::string base = "backend=\"cuda\",generation=\"0\"";
  EXPECT_TRUE(has("uma_residency_driver_counters{" + base + "} 1")) << text;
  EXPECT_TRUE(has("uma_residency_driver_bytes_total{" + base +
                  ",direction=\"to_device\",cause=\"prefetch\"} 200"));
  EXPECT_TRUE(has("uma_residency_driver_bytes_total{" + base +
                  ",direction=\"to_device\",cause=\"driver\"} 100"));
  EXPECT_TRUE(has("uma_residency_driver_faults_total{" + base + ",processor=\"gpu\"} 5"));
  EXPECT_TRUE(
      has("uma_residency_label_bytes_total{" + base + ",label=\"kv\",move=\"to_host\"} 64"));
  EXPECT_TRUE(has("uma_residency_label_driver_bytes_total{" + base +
                  ",label=\"kv\",direction=\"to_device\"} 40"));

  s.residency->driver_counters_on = false;
  const auto off = to_prometheus(s);
  EXPECT_NE(off.find("uma_residency_driver_counters{" + base + "} 0\n"), std::string::npos);
  EXPECT_EQ(off.find("uma_residency_driver_bytes_total"), std::string::npos);
}

}  // namespace
}  // namespace uma
