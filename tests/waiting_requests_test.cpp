// The allocator supervisor's book of waiting requests (actors/detail/waiting_requests.hpp) on
// its own: requests stashed between incarnations, forwarded ones not answered yet, explicit
// restarts. The supervisor's own tests (supervisor_test.cpp, supervisor_restart_test.cpp) drive
// it through actors; these name each rule directly, with callables that record what they got.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <uma/actors/detail/waiting_requests.hpp>
#include <uma/messages/error_category.hpp>

namespace uma {
namespace {

using detail::waiting_requests;

/// What the book's callables did, in the order they did it ("run a", "fail a:stopped", ...).
struct journal {
  std::vector<std::string> lines;

  std::function<void()> run(std::string name) {
    return [this, name] { lines.push_back("run " + name); };
  }
  waiting_requests::fail_fn fail(std::string name) {
    return [this, name](const caf::error& err) {
      lines.push_back("fail " + name + ":" + std::string{to_string(static_cast<errc>(err.code()))});
    };
  }
  std::function<void(std::uint64_t)> started(std::string name) {
    return [this, name](std::uint64_t gen) {
      lines.push_back("started " + name + ":" + std::to_string(gen));
    };
  }
};

using lines = std::vector<std::string>;

caf::error stopped() {
  return make_caf_error(errc::allocator_stopped, "stopped");
}
caf::error escalated() {
  return make_caf_error(errc::unrecoverable, "escalates");
}

TEST(waiting_requests_test, StashedRequestsRunInArrivalOrderThenRestartWaitersHearTheGeneration) {
  journal j;
  waiting_requests book;
  book.await_restart(j.started("r1"), j.fail("r1"));
  book.stash(j.run("a"), j.fail("a"));
  book.stash(j.run("b"), j.fail("b"));
  book.await_restart(j.started("r2"), j.fail("r2"));
  book.stash(j.run("c"), j.fail("c"));
  EXPECT_EQ(book.stashed(), 3u);
  EXPECT_EQ(book.restart_waiters(), 2u);
  book.incarnation_started(7);
  EXPECT_EQ(j.lines, (lines{"run a", "run b", "run c", "started r1:7", "started r2:7"}));
  EXPECT_TRUE(book.empty());
}

TEST(waiting_requests_test, AStartedIncarnationRunsEachStashedRequestOnce) {
  journal j;
  waiting_requests book;
  book.stash(j.run("a"), j.fail("a"));
  book.incarnation_started(1);
  book.incarnation_started(2);
  book.fail_all(stopped());
  EXPECT_EQ(j.lines, (lines{"run a"}));
}

TEST(waiting_requests_test, FailWaitingFailsStashThenRestartsButLeavesForwardedRequests) {
  journal j;
  waiting_requests book;
  book.await_restart(j.started("r"), j.fail("r"));
  book.stash(j.run("a"), j.fail("a"));
  const auto id = book.forwarded(j.fail("f"));
  book.stash(j.run("b"), j.fail("b"));
  book.fail_waiting(escalated());
  EXPECT_EQ(j.lines,
            (lines{"fail a:unrecoverable", "fail b:unrecoverable", "fail r:unrecoverable"}));
  EXPECT_EQ(book.in_flight(), 1u);
  EXPECT_TRUE(book.answered(id));
}

TEST(waiting_requests_test, ForwardedRequestsGetDistinctIdsAndFailInTheOrderForwarded) {
  journal j;
  waiting_requests book;
  const auto a = book.forwarded(j.fail("a"));
  const auto b = book.forwarded(j.fail("b"));
  const auto c = book.forwarded(j.fail("c"));
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  EXPECT_NE(a, c);
  book.fail_in_flight(stopped());
  EXPECT_EQ(j.lines, (lines{"fail a:allocator_stopped", "fail b:allocator_stopped",
                            "fail c:allocator_stopped"}));
  EXPECT_EQ(book.in_flight(), 0u);
}

TEST(waiting_requests_test, AnAnsweredRequestIsNeverFailed) {
  journal j;
  waiting_requests book;
  const auto a = book.forwarded(j.fail("a"));
  const auto b = book.forwarded(j.fail("b"));
  EXPECT_TRUE(book.answered(a));
  EXPECT_EQ(book.in_flight(), 1u);
  book.fail_in_flight(stopped());
  EXPECT_EQ(j.lines, (lines{"fail b:allocator_stopped"}));
  EXPECT_FALSE(book.answered(b));  // failed: its entry went with it
}

TEST(waiting_requests_test, AnsweringAnIdTwiceOrOneNeverGivenChangesNothing) {
  journal j;
  waiting_requests book;
  const auto a = book.forwarded(j.fail("a"));
  EXPECT_TRUE(book.answered(a));
  EXPECT_FALSE(book.answered(a));
  EXPECT_FALSE(book.answered(a + 100));
  const auto b = book.forwarded(j.fail("b"));
  EXPECT_FALSE(book.answered(b + 1));
  EXPECT_EQ(book.in_flight(), 1u);
}

TEST(waiting_requests_test, FailAllFailsEveryEntryOnceAndEmptiesTheBook) {
  journal j;
  waiting_requests book;
  (void)book.forwarded(j.fail("f1"));
  book.stash(j.run("a"), j.fail("a"));
  book.await_restart(j.started("r"), j.fail("r"));
  (void)book.forwarded(j.fail("f2"));
  book.fail_all(stopped());
  EXPECT_EQ(j.lines, (lines{"fail a:allocator_stopped", "fail r:allocator_stopped",
                            "fail f1:allocator_stopped", "fail f2:allocator_stopped"}));
  EXPECT_TRUE(book.empty());
  book.fail_all(escalated());
  book.incarnation_started(3);
  EXPECT_EQ(j.lines.size(), 4u);  // nothing answered twice
}

TEST(waiting_requests_test, AnEntryAddedWhileFailingIsFailedInTheSameCall) {
  journal j;
  waiting_requests book;
  book.stash(j.run("a"), [&](const caf::error&) {
    j.lines.push_back("fail a");
    book.stash(j.run("late"), j.fail("late"));
    (void)book.forwarded(j.fail("late forwarded"));
  });
  book.await_restart(j.started("r"), [&](const caf::error&) {
    j.lines.push_back("fail r");
    book.stash(j.run("later"), j.fail("later"));
  });
  book.fail_all(stopped());
  EXPECT_EQ(j.lines,
            (lines{"fail a", "fail late:allocator_stopped", "fail r",
                   "fail late forwarded:allocator_stopped", "fail later:allocator_stopped"}));
  EXPECT_TRUE(book.empty());
}

TEST(waiting_requests_test, ARequestStashedByARunRunsInTheSameStartAfterTheOthers) {
  journal j;
  waiting_requests book;
  book.stash(
      [&] {
        j.lines.push_back("run a");
        book.stash(j.run("again"), j.fail("again"));
      },
      j.fail("a"));
  book.stash(j.run("b"), j.fail("b"));
  book.incarnation_started(2);
  EXPECT_EQ(j.lines, (lines{"run a", "run b", "run again"}));
  EXPECT_TRUE(book.empty());
}

TEST(waiting_requests_test, AnEntryTakenOutToBeFailedIsFailedEvenIfAnsweredMeanwhile) {
  journal j;
  waiting_requests book;
  waiting_requests::in_flight_id b = 0;
  (void)book.forwarded([&](const caf::error&) {
    j.lines.push_back("fail a");
    EXPECT_FALSE(book.answered(b));  // already out of the book: it will be failed
  });
  b = book.forwarded(j.fail("b"));
  book.fail_in_flight(stopped());
  EXPECT_EQ(j.lines, (lines{"fail a", "fail b:allocator_stopped"}));
}

TEST(waiting_requests_test, AThrowingFailFunctionStopsNoOtherAndItsErrorComesOutAfterAll) {
  journal j;
  waiting_requests book;
  book.stash(j.run("a"), [](const caf::error&) { throw std::runtime_error("first"); });
  book.stash(j.run("b"), j.fail("b"));
  book.await_restart(j.started("r"), [](const caf::error&) { throw std::logic_error("second"); });
  (void)book.forwarded(j.fail("f"));
  try {
    book.fail_all(stopped());
    ADD_FAILURE() << "fail_all swallowed the fail function's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "first");  // the first one thrown
  }
  EXPECT_EQ(j.lines, (lines{"fail b:allocator_stopped", "fail f:allocator_stopped"}));
  EXPECT_TRUE(book.empty());
}

TEST(waiting_requests_test, AThrowingRunStopsNoOtherRunNorTheRestartWaiters) {
  journal j;
  waiting_requests book;
  book.stash([] { throw std::runtime_error("run a"); }, j.fail("a"));
  book.stash(j.run("b"), j.fail("b"));
  book.await_restart(j.started("r"), j.fail("r"));
  EXPECT_THROW(book.incarnation_started(4), std::runtime_error);
  EXPECT_EQ(j.lines, (lines{"run b", "started r:4"}));
  EXPECT_TRUE(book.empty());
}

}  // namespace
}  // namespace uma
