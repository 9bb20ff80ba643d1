#include <gtest/gtest.h>

#include <uma/sys/fault_injecting_backend.hpp>
#include <uma/sys/host_backend.hpp>
#include "support/actor_fixture.hpp"

namespace uma {
namespace {

TEST(FaultInjectingBackend, FailsExactlyTheNthCallOfTheChosenOperation) {
  auto inner = std::make_shared<host_backend>();
  fault_injecting_backend b(inner);
  b.inject({backend_op::allocate, 2, errc::out_of_memory});
  void* first = b.allocate_managed(4096, attach_flag::global);
  UMA_EXPECT_ERRC((void)b.allocate_managed(4096, attach_flag::global), errc::out_of_memory);
  void* third = b.allocate_managed(4096, attach_flag::global);
  EXPECT_EQ(b.calls(backend_op::allocate), 3u);
  EXPECT_EQ(b.injected(), 1u);
  EXPECT_EQ(inner->counters().allocations, 2u);  // the failed call never reached the backend
  b.free_managed(first, 4096);
  b.free_managed(third, 4096);
}

TEST(FaultInjectingBackend, EveryNthAndFatalFaults) {
  fault_injecting_backend b(std::make_shared<host_backend>());
  b.inject({backend_op::synchronize, 3, errc::context_lost, true, true});
  int failures = 0;
  for (int i = 0; i < 9; ++i) {
    try {
      b.synchronize();
    } catch (const fatal_error& e) {
      EXPECT_TRUE(is_fatal(e));
      ++failures;
    }
  }
  EXPECT_EQ(failures, 3);
}

TEST(FaultInjectingBackend, AFailedFreeStillReleasesTheMemoryAndIsCounted) {
  auto inner = std::make_shared<host_backend>();
  fault_injecting_backend b(inner);
  b.inject({backend_op::free, 1, errc::backend_error});
  void* p = b.allocate_managed(4096, attach_flag::global);
  b.free_managed(p, 4096);
  EXPECT_EQ(inner->counters().live_allocations, 0u);
  EXPECT_EQ(b.counters().bad_frees, 1u);
}

TEST(FaultSpec, ParsesTheCliForm) {
  const auto f = parse_fault("prefetch:3:context_lost:every:fatal");
  EXPECT_EQ(f.op, backend_op::prefetch);
  EXPECT_EQ(f.nth, 3u);
  EXPECT_EQ(f.code, errc::context_lost);
  EXPECT_TRUE(f.every);
  EXPECT_TRUE(f.fatal);
  UMA_EXPECT_ERRC((void)parse_fault("prefetch:0:context_lost"), errc::invalid_argument);
  UMA_EXPECT_ERRC((void)parse_fault("fly:1:context_lost"), errc::invalid_argument);
  UMA_EXPECT_ERRC((void)parse_fault("advise:1:oops"), errc::invalid_argument);
}

TEST(ErrorClassification, StickyAndLostContextsAreFatalOthersAreNot) {
  EXPECT_TRUE(is_fatal(error(errc::context_lost, "x")));
  EXPECT_TRUE(is_fatal(error(errc::unrecoverable, "x")));
  EXPECT_TRUE(is_fatal(cuda_error(errc::backend_error, 700, true, "illegal address")));
  EXPECT_FALSE(is_fatal(cuda_error(errc::invalid_argument, 1, false, "invalid value")));
  EXPECT_FALSE(is_fatal(error(errc::out_of_memory, "x")));
}

}  // namespace
}  // namespace uma
