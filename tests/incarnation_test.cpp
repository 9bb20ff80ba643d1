// The allocator incarnation (actors/detail/incarnation.hpp) on its own: its state is reached
// only through a guard, a caller's guard waits at most its deadline, and once the incarnation
// stopped a caller's guard is refused, so a late caller reaches no state.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>

#include <uma/actors/detail/incarnation.hpp>
#include "support/actor_fixture.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

std::unique_ptr<detail::incarnation> make_incarnation() {
  return std::make_unique<detail::incarnation>(allocator_config{},
                                               make_backend(backend_choice::host));
}

TEST(incarnation, AGuardGivesTheStateAndACallerWaitsForItAtMostItsDeadline) {
  auto inc = make_incarnation();
  const auto held = inc->locked();
  EXPECT_EQ(held->stats().live_regions, 0u);
  auto other = std::async(std::launch::async, [&] {
    UMA_EXPECT_ERRC(inc->locked(steady::now() + 20ms), errc::timeout);
  });
  other.get();
}

TEST(incarnation, ACallersGuardIsRefusedOnceTheIncarnationStopped) {
  auto inc = make_incarnation();
  {
    auto g = inc->locked();
    inc->stop(g);
  }
  EXPECT_TRUE(inc->ended());
  UMA_EXPECT_ERRC(inc->locked(steady::now() + 1s), errc::allocator_stopped);
  UMA_EXPECT_ERRC(inc->stats(steady::now() + 1s), errc::allocator_stopped);
  UMA_EXPECT_ERRC(inc->allocate(allocate_request{std::size_t{32} << 20, 1}, steady::now() + 1s),
                  errc::allocator_stopped);
}

}  // namespace
}  // namespace uma
