// A conformance suite over uma's resource stack (memory/resource_stack.hpp), as RMM's
// mr_ref_test.hpp has for its resources. The stack sits on a fault-injecting backend in
// pass-through over the host backend, so that tests can make one backend call fail. The concurrency
// test is why this file is in uma_reliability_tests too (TSan).

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include <uma/memory/resource_stack.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include <uma/sys/host_backend.hpp>

namespace uma {
namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t quota = 4096 * KiB;

class resource_stack_conformance : public ::testing::Test {
 protected:
  std::shared_ptr<host_backend> host_ = std::make_shared<host_backend>();
  std::shared_ptr<fault_injecting_backend> faults_ =
      std::make_shared<fault_injecting_backend>(host_);
  std::shared_ptr<resource_stack> stack_ =
      make_resource_stack(faults_, {allocation_policy::direct, quota});
  memory_resource& top_ = stack_->top();

  static allocation_request req(std::size_t bytes, std::size_t alignment = 1,
                                std::string label = {}) {
    return {bytes, alignment, attach_flag::global, std::move(label)};
  }
  [[nodiscard]] resource_statistics counted() const { return stack_->statistics().statistics(); }
};

/// Expects `stmt` to throw uma::error with `code`.
#define EXPECT_ERRC(stmt, expected)              \
  do {                                           \
    try {                                        \
      static_cast<void>(stmt);                   \
      ADD_FAILURE() << #stmt " did not throw";   \
    } catch (const ::uma::error& e) {            \
      EXPECT_EQ(e.code(), expected) << e.what(); \
    }                                            \
  } while (false)

TEST_F(resource_stack_conformance, AllocateAndDeallocateRoundTrip) {
  const auto a = top_.allocate(req(1000));
  ASSERT_NE(a.data, nullptr);
  EXPECT_EQ(a.bytes, 1000u);
  EXPECT_GE(a.charged, 1000u);
  EXPECT_EQ(a.charged, top_.charge_for(1000, 1));
  std::fill_n(a.data, a.bytes, std::byte{7});  // usable memory
  EXPECT_EQ(counted().current_count, 1u);
  top_.deallocate(a);
  EXPECT_EQ(counted().current_count, 0u);
  EXPECT_EQ(counted().current_bytes, 0u);
}

TEST_F(resource_stack_conformance, AlignmentIsHonoured) {
  for (std::size_t alignment : {std::size_t{1}, std::size_t{256}, 4 * KiB, 64 * KiB}) {
    const auto a = top_.allocate(req(100, alignment));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data) % alignment, 0u) << alignment;
    top_.deallocate(a);
  }
  EXPECT_EQ(stack_->limit().held(), 0u);
}

TEST_F(resource_stack_conformance, ZeroSizeBadAlignmentAndOverflowAreRefused) {
  EXPECT_ERRC((void)top_.allocate(req(0)), errc::invalid_argument);
  EXPECT_ERRC((void)top_.allocate(req(16, 24)), errc::invalid_argument);
  EXPECT_ERRC((void)top_.allocate(req(SIZE_MAX, 64 * KiB)), errc::overflow);
  EXPECT_ERRC((void)top_.charge_for(SIZE_MAX, 64 * KiB), errc::overflow);
  EXPECT_EQ(faults_->calls(backend_op::allocate), 0u);
  EXPECT_EQ(counted().allocations, 0u);
}

TEST_F(resource_stack_conformance, AHugeRequestIsRefusedByTheQuotaWithoutWrapping) {
  EXPECT_ERRC((void)top_.allocate(req(SIZE_MAX)), errc::quota_exceeded);
  EXPECT_EQ(stack_->limit().held(), 0u);
  EXPECT_EQ(faults_->calls(backend_op::allocate), 0u);
}

TEST_F(resource_stack_conformance, QuotaExceededChangesNothing) {
  const auto a = top_.allocate(req(3072 * KiB));
  const auto held = stack_->limit().held();
  const auto before = counted();
  EXPECT_ERRC((void)top_.allocate(req(2048 * KiB)), errc::quota_exceeded);
  EXPECT_EQ(stack_->limit().held(), held);
  EXPECT_EQ(counted().current_bytes, before.current_bytes);
  EXPECT_EQ(counted().current_count, before.current_count);
  EXPECT_EQ(counted().failures, before.failures + 1);
  top_.deallocate(a);
}

TEST_F(resource_stack_conformance, TheLimitChangesAtRunTimeButNeverBelowWhatIsHeld) {
  const auto a = top_.allocate(req(512 * KiB));
  const auto held = stack_->limit().held();
  EXPECT_ERRC(stack_->limit().set_limit(held - 1), errc::invalid_argument);
  EXPECT_EQ(stack_->limit().limit(), quota);
  stack_->limit().set_limit(held);
  EXPECT_EQ(stack_->limit().limit(), held);
  top_.deallocate(a);
  stack_->limit().set_limit(2 * quota);
  const auto big = top_.allocate(req(5000 * KiB));  // room now
  top_.deallocate(big);
}

TEST_F(resource_stack_conformance, StatisticsCountCurrentPeakTotalsAndCalls) {
  const auto a = top_.allocate(req(8 * KiB));
  const auto b = top_.allocate(req(4 * KiB));
  const auto charged = a.charged + b.charged;
  top_.deallocate(a);
  const auto c = top_.allocate(req(4 * KiB));
  const auto s = counted();
  EXPECT_EQ(s.current_count, 2u);
  EXPECT_EQ(s.current_bytes, b.charged + c.charged);
  EXPECT_EQ(s.peak_bytes, charged);
  EXPECT_EQ(s.total_bytes, charged + c.charged);
  EXPECT_EQ(s.allocations, 3u);
  EXPECT_EQ(s.deallocations, 1u);
  EXPECT_EQ(s.failures, 0u);
  top_.deallocate(b);
  top_.deallocate(c);
}

TEST_F(resource_stack_conformance, TrackingReportsOutstandingAllocationsWithLabels) {
  const auto a = top_.allocate(req(4 * KiB, 1, "weights"));
  const auto b = top_.allocate(req(8 * KiB, 1, "activations"));
  auto report = stack_->tracking().outstanding();
  ASSERT_EQ(report.size(), 2u);
  EXPECT_EQ(stack_->tracking().label_of(a.data), "weights");
  EXPECT_EQ(stack_->tracking().label_of(b.data), "activations");
  for (const auto& t : report)
    EXPECT_EQ(t.bytes, t.data == a.data ? 4 * KiB : 8 * KiB);
  top_.deallocate(a);
  report = stack_->tracking().outstanding();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].label, "activations");
  top_.deallocate(b);
  EXPECT_EQ(stack_->tracking().size(), 0u);
}

TEST_F(resource_stack_conformance, AFailedBackendCallIsRolledBackEverywhere) {
  faults_->inject({.op = backend_op::allocate, .nth = 1, .code = errc::backend_error});
  EXPECT_ERRC((void)top_.allocate(req(4 * KiB)), errc::backend_error);
  EXPECT_EQ(stack_->limit().held(), 0u);
  EXPECT_EQ(counted().current_count, 0u);
  EXPECT_EQ(counted().failures, 1u);
  EXPECT_EQ(stack_->tracking().size(), 0u);
  const auto ok = top_.allocate(req(4 * KiB));
  top_.deallocate(ok);
}

TEST_F(resource_stack_conformance, OutOfMemoryIsTheCallersAndNotRetried) {
  // No layer caches: nothing could be given back to make room.
  const auto before = faults_->calls(backend_op::allocate);
  faults_->inject({.op = backend_op::allocate, .nth = 1, .code = errc::out_of_memory});
  EXPECT_ERRC((void)top_.allocate(req(4 * KiB)), errc::out_of_memory);
  EXPECT_EQ(faults_->calls(backend_op::allocate), before + 1);
  EXPECT_EQ(stack_->limit().held(), 0u);
}

TEST_F(resource_stack_conformance, ConcurrentCallersBalance) {
  constexpr int threads = 4, rounds = 100;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::vector<allocation> mine;
      for (int i = 0; i < rounds; ++i) {
        mine.push_back(top_.allocate(req((1 + (i + t) % 8) * KiB, 1, "t")));
        if (i % 3 == 2) {
          top_.deallocate(mine.front());
          mine.erase(mine.begin());
        }
      }
      for (const auto& a : mine)
        top_.deallocate(a);
    });
  for (auto& w : workers)
    w.join();
  const auto s = counted();
  EXPECT_EQ(s.allocations, std::uint64_t{threads * rounds});
  EXPECT_EQ(s.deallocations, s.allocations);
  EXPECT_EQ(s.current_bytes, 0u);
  EXPECT_EQ(stack_->tracking().size(), 0u);
  EXPECT_EQ(stack_->limit().held(), 0u);
  EXPECT_EQ(host_->counters().live_allocations, 0u);
}

}  // namespace
}  // namespace uma
