// The C ABI's residency plans (actors/c/uma.h, docs/c_abi.md "Residency"), called as a C program
// calls them, on the host backend's emulated device: pages of uma_malloc blocks charged exactly
// (a page two blocks share, once), bad input refused with a status and nothing changed, the
// sequence form, the report as a struct and as JSON, and many threads planning at once.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <uma/c/uma.h>

namespace {

constexpr std::uint64_t page = 4096;
constexpr std::uint64_t MiB = std::uint64_t{1} << 20;

class c_plans : public ::testing::Test {
 protected:
  c_plans() {
    uma_config c;
    uma_config_init(&c);
    c.backend = UMA_BACKEND_HOST;
    c.host_devices = 1;
    c.host_device_bytes = 64 * MiB;
    EXPECT_EQ(uma_create(&c, &a_), UMA_OK) << uma_last_error();
  }
  ~c_plans() override { uma_destroy(a_); }

  void* block(std::size_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(uma_malloc(a_, bytes, 0, nullptr, &p), UMA_OK) << uma_last_error();
    return p;
  }
  uma_residency_report report() {
    uma_residency_report r{};
    r.struct_size = sizeof r;
    EXPECT_EQ(uma_get_residency(a_, &r), UMA_OK) << uma_last_error();
    return r;
  }
  uma_status plan(const uma_range* ranges, std::size_t n, uma_plan_result* out = nullptr) {
    uma_plan_options o;
    uma_plan_options_init(&o);
    o.policy = UMA_RESIDENCY_MIGRATE;
    return uma_will_access(a_, ranges, n, &o, out);
  }

  uma_allocator* a_ = nullptr;
};

TEST_F(c_plans, BlocksOfOneSlabChargeTheirOwnPagesNotTheSlab) {
  void* x = block(6000);  // two pages each (blocks are whole pages), carved from one slab
  void* y = block(6000);
  const auto unplanned = report().unplanned_bytes;
  ASSERT_GE(unplanned, 4 * page);
  uma_range both[] = {{x, 6000}, {y, 6000}};
  uma_plan_result r{};
  r.struct_size = sizeof r;
  ASSERT_EQ(plan(both, 2, &r), UMA_OK) << uma_last_error();
  EXPECT_EQ(r.to_device_bytes, 4 * page);
  const auto rep = report();
  EXPECT_EQ(rep.devices[0].resident_bytes, 4 * page);
  EXPECT_EQ(rep.unplanned_bytes, unplanned - 4 * page);  // the rest of the slab is not charged
  EXPECT_EQ(uma_done_with(a_, both, 2), UMA_OK) << uma_last_error();
  EXPECT_EQ(report().devices[0].held_bytes, 0u);
  EXPECT_EQ(uma_free(a_, x, 6000, 0, nullptr), UMA_OK);
  EXPECT_EQ(uma_free(a_, y, 6000, 0, nullptr), UMA_OK);
}

TEST_F(c_plans, APageTwoRangesShareIsChargedOnceAndHeldByBoth) {
  auto* p = static_cast<char*>(block(4 * page));
  uma_range first{p, page + 100};         // pages 0 and 1
  uma_range second{p + page + 200, 100};  // page 1
  uma_plan_result r{};
  r.struct_size = sizeof r;
  ASSERT_EQ(plan(&first, 1, &r), UMA_OK) << uma_last_error();
  EXPECT_EQ(r.to_device_bytes, 2 * page);
  ASSERT_EQ(plan(&second, 1, &r), UMA_OK) << uma_last_error();
  EXPECT_EQ(r.to_device_bytes, 0u);  // page 1 is there: charged once
  EXPECT_EQ(report().devices[0].resident_bytes, 2 * page);
  EXPECT_EQ(uma_done_with(a_, &first, 1), UMA_OK);
  EXPECT_EQ(report().devices[0].held_bytes, page);  // the second plan holds page 1
  EXPECT_EQ(uma_dead(a_, &second, 1, nullptr), UMA_ERR_INVALID_ARGUMENT);  // held
  EXPECT_EQ(uma_done_with(a_, &second, 1), UMA_OK);
  uma_plan_result d{};
  d.struct_size = sizeof d;
  EXPECT_EQ(uma_dead(a_, &first, 1, &d), UMA_OK) << uma_last_error();
  EXPECT_EQ(d.discarded_bytes, 2 * page);
  EXPECT_EQ(report().devices[0].resident_bytes, 0u);
  EXPECT_EQ(uma_free(a_, p, 0, 0, nullptr), UMA_OK);
}

TEST_F(c_plans, BadInputGetsAStatusAndChangesNothing) {
  void* p = block(64 * 1024);
  uma_range r{p, 4096};
  uma_plan_options o;
  uma_plan_options_init(&o);
  uma_plan_result out{};
  out.struct_size = sizeof out;
  EXPECT_EQ(uma_will_access(nullptr, &r, 1, &o, &out), UMA_ERR_NULL_ARGUMENT);
  EXPECT_EQ(uma_will_access(a_, nullptr, 1, &o, &out), UMA_ERR_NULL_ARGUMENT);
  EXPECT_EQ(uma_will_access(a_, &r, 0, &o, &out), UMA_ERR_INVALID_ARGUMENT);
  uma_range null_ptr{nullptr, 8};
  EXPECT_EQ(uma_will_access(a_, &null_ptr, 1, &o, &out), UMA_ERR_NULL_ARGUMENT);
  int local = 0;
  uma_range stray[] = {r, {&local, sizeof local}};
  EXPECT_EQ(uma_will_access(a_, stray, 2, &o, &out), UMA_ERR_UNKNOWN_POINTER);
  EXPECT_NE(std::string(uma_last_error()).find("ranges[1]"), std::string::npos) << uma_last_error();
  uma_range past{p, 64 * 1024 + 1};
  EXPECT_EQ(uma_will_access(a_, &past, 1, &o, &out), UMA_ERR_UNKNOWN_POINTER);
  auto bad = o;
  std::memset(&bad.mode, 0x7f, sizeof bad.mode);
  EXPECT_EQ(uma_will_access(a_, &r, 1, &bad, &out), UMA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(uma_last_error()).find("mode"), std::string::npos);
  bad = o;
  std::memset(&bad.policy, 0x7f, sizeof bad.policy);
  EXPECT_EQ(uma_will_access(a_, &r, 1, &bad, &out), UMA_ERR_INVALID_ARGUMENT);
  bad = o;
  bad.struct_size = 2;
  EXPECT_EQ(uma_will_access(a_, &r, 1, &bad, &out), UMA_ERR_INVALID_ARGUMENT);
  bad = o;
  bad.device = 5;
  EXPECT_EQ(uma_will_access(a_, &r, 1, &bad, &out), UMA_ERR_INVALID_ARGUMENT);
  uma_plan_result small{};
  small.struct_size = 1;
  EXPECT_EQ(uma_will_access(a_, &r, 1, &o, &small), UMA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(uma_done_with(a_, &r, 1), UMA_ERR_INVALID_ARGUMENT);  // in no plan
  EXPECT_EQ(uma_dead(a_, &r, 1, nullptr), UMA_ERR_INVALID_ARGUMENT);
  uma_residency_report tiny{};
  tiny.struct_size = 0;
  EXPECT_EQ(uma_get_residency(a_, &tiny), UMA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(uma_get_residency(a_, nullptr), UMA_ERR_NULL_ARGUMENT);
  const auto rep = report();
  EXPECT_EQ(rep.devices[0].resident_bytes, 0u);
  EXPECT_EQ(rep.placements, 0u);
  EXPECT_EQ(uma_will_access(a_, &r, 1, nullptr, nullptr), UMA_OK);  // NULL options: defaults
  EXPECT_EQ(uma_free(a_, p, 0, 0, nullptr), UMA_OK);
}

TEST_F(c_plans, BudgetsAreRefusedClearlyWithoutTheDevice) {
  EXPECT_EQ(uma_set_device_budget(a_, 0, 8 * page), UMA_OK);
  EXPECT_EQ(report().devices[0].budget_bytes, 8 * page);
  EXPECT_EQ(uma_set_device_budget(a_, 1, 8 * page), UMA_ERR_NO_DEVICE);
  EXPECT_EQ(uma_set_device_budget(a_, 0, 0), UMA_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(uma_set_device_budget(a_, 0, 65 * MiB), UMA_ERR_INVALID_ARGUMENT);
  uma_config c;
  uma_config_init(&c);
  c.backend = UMA_BACKEND_HOST;
  c.host_devices = 0;
  uma_allocator* none = nullptr;
  ASSERT_EQ(uma_create(&c, &none), UMA_OK);
  EXPECT_EQ(uma_set_device_budget(none, 0, 8 * page), UMA_ERR_NO_DEVICE);
  EXPECT_NE(std::string(uma_last_error()).find("host_devices is 0"), std::string::npos);
  uma_destroy(none);
}

TEST_F(c_plans, APlanPastTheBudgetIsRefusedWithQuotaExceeded) {
  ASSERT_EQ(uma_set_device_budget(a_, 0, 4 * page), UMA_OK);
  void* p = block(64 * 1024);
  uma_range r{p, 8 * page};
  EXPECT_EQ(plan(&r, 1), UMA_ERR_QUOTA_EXCEEDED);
  EXPECT_EQ(report().devices[0].resident_bytes, 0u);
  EXPECT_EQ(uma_free(a_, p, 0, 0, nullptr), UMA_OK);
}

TEST_F(c_plans, ALoweredBudgetEvictsUnheldPagesBeforeItReturnsAndKeepsHeldOnes) {
  void* p = block(64 * 1024);
  uma_range unheld{p, 4 * page};
  uma_range held{static_cast<char*>(p) + 4 * page, 4 * page};
  ASSERT_EQ(plan(&unheld, 1), UMA_OK);
  ASSERT_EQ(uma_done_with(a_, &unheld, 1), UMA_OK);
  ASSERT_EQ(plan(&held, 1), UMA_OK);
  ASSERT_EQ(uma_set_device_budget(a_, 0, 2 * page), UMA_OK) << uma_last_error();
  auto r = report();
  EXPECT_EQ(r.devices[0].budget_bytes, 2 * page);
  EXPECT_EQ(r.devices[0].resident_bytes, 4 * page);  // the held pages stay, above the budget
  EXPECT_EQ(r.devices[0].held_bytes, 4 * page);
  EXPECT_EQ(r.evictions, 1u);
  EXPECT_EQ(r.to_host_bytes, 4 * page);                        // contents kept
  ASSERT_EQ(uma_set_device_budget(a_, 0, 16 * page), UMA_OK);  // raised: nothing moves
  EXPECT_EQ(report().evictions, 1u);
  EXPECT_EQ(uma_done_with(a_, &held, 1), UMA_OK);
  EXPECT_EQ(uma_free(a_, p, 0, 0, nullptr), UMA_OK);
}

TEST_F(c_plans, ASequencePlansItsStepsAheadAndEndsThem) {
  void* p = block(64 * 1024);
  uma_range steps[] = {{p, 4 * page}, {static_cast<char*>(p) + 4 * page, 4 * page}};
  uma_sequence* s = nullptr;
  ASSERT_EQ(uma_sequence_create(a_, 1, &s), UMA_OK);
  for (auto& r : steps)
    ASSERT_EQ(uma_sequence_add_step(s, &r, 1, nullptr), UMA_OK) << uma_last_error();
  uma_plan_result out{};
  out.struct_size = sizeof out;
  ASSERT_EQ(uma_sequence_begin(s, 0, &out), UMA_OK) << uma_last_error();
  EXPECT_EQ(uma_sequence_add_step(s, steps, 1, nullptr), UMA_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(uma_sequence_begin(s, 1, &out), UMA_OK) << uma_last_error();
  EXPECT_EQ(report().devices[0].resident_bytes, 8 * page);
  EXPECT_GT(report().devices[0].held_bytes, 0u);
  EXPECT_EQ(uma_sequence_finish(s), UMA_OK);
  EXPECT_EQ(report().devices[0].held_bytes, 0u);
  EXPECT_EQ(uma_sequence_destroy(s), UMA_OK);
  EXPECT_EQ(uma_sequence_destroy(nullptr), UMA_OK);
  uma_sequence* empty = nullptr;
  ASSERT_EQ(uma_sequence_create(a_, 0, &empty), UMA_OK);
  EXPECT_EQ(uma_sequence_begin(empty, 0, nullptr), UMA_ERR_INVALID_ARGUMENT);  // no step
  EXPECT_EQ(uma_sequence_destroy(empty), UMA_OK);
  EXPECT_EQ(uma_free(a_, p, 0, 0, nullptr), UMA_OK);
}

TEST_F(c_plans, TheReportGrowsByStructSizeAndComesAsJson) {
  void* p = block(64 * 1024);
  uma_range r{p, 2 * page};
  ASSERT_EQ(plan(&r, 1), UMA_OK);
  uma_residency_report old{};
  std::memset(&old, 0xab, sizeof old);
  old.struct_size = offsetof(uma_residency_report, devices);  // a caller that knew two fields
  ASSERT_EQ(uma_get_residency(a_, &old), UMA_OK);
  EXPECT_EQ(old.device_count, 1u);
  EXPECT_EQ(old.devices[0].memory_bytes, 0xababababababababu);  // not written past its size
  const auto full = report();
  EXPECT_EQ(full.to_device_bytes, 2 * page);
  EXPECT_GT(full.unplanned_bytes, 0u);  // the rest of the slab
  std::size_t needed = 0;
  EXPECT_EQ(uma_residency_json(a_, nullptr, 0, &needed), UMA_ERR_BUFFER_TOO_SMALL);
  std::string json(needed, '\0');
  ASSERT_EQ(uma_residency_json(a_, json.data(), json.size(), &needed), UMA_OK);
  EXPECT_NE(json.find("\"unplanned_bytes\":"), std::string::npos) << json;
  EXPECT_NE(json.find("\"to_device_bytes\":8192"), std::string::npos) << json;
  EXPECT_EQ(uma_free(a_, p, 0, 0, nullptr), UMA_OK);
}

TEST_F(c_plans, ManyThreadsPlanningAtOnceKeepTheAccountExact) {
  ASSERT_EQ(uma_set_device_budget(a_, 0, 64 * page), UMA_OK);
  constexpr int threads = 8;
  std::vector<std::thread> pool;
  std::vector<int> failures(threads, 0);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      void* p = nullptr;
      if (uma_malloc(a_, 3 * page, 0, nullptr, &p) != UMA_OK) {
        ++failures[t];
        return;
      }
      uma_range r{p, 3 * page};
      for (int i = 0; i < 50; ++i) {
        const auto s = plan(&r, 1);
        if (s == UMA_OK)
          failures[t] += uma_done_with(a_, &r, 1) != UMA_OK;
        else if (s != UMA_ERR_QUOTA_EXCEEDED)
          ++failures[t];
      }
      failures[t] += uma_free(a_, p, 0, 0, nullptr) != UMA_OK;
    });
  for (auto& th : pool)
    th.join();
  for (int t = 0; t < threads; ++t)
    EXPECT_EQ(failures[t], 0) << "thread " << t;
  const auto rep = report();
  EXPECT_EQ(rep.devices[0].held_bytes, 0u);
  EXPECT_LE(rep.devices[0].peak_bytes, 64 * page);
  EXPECT_GT(rep.placements, 0u);
}

}  // namespace
