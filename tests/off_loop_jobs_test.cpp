// detail::off_loop_jobs: the allocator's work in flight on its lanes, each job's completion
// kept by ticket until its job_done comes back (here to a scoped actor standing in for the
// allocator), stream-ordered jobs on one lane, a barrier behind everything queued.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <thread>

#include <caf/after.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/detail/off_loop_jobs.hpp>
#include "support/actor_fixture.hpp"

namespace uma::detail {
namespace {

using namespace std::chrono_literals;

/// The lane thread a job ran on, as a number a message can carry.
std::uint64_t this_thread() {
  return std::hash<std::thread::id>{}(std::this_thread::get_id());
}

class off_loop_jobs_test : public test::actor_fixture {
 protected:
  /// The next job_done to `self`: runs its completion; the value the job returned.
  std::uint64_t finish_next(caf::scoped_actor& self) {
    std::uint64_t value = 0;
    self->receive(
        [&](job_done_atom, std::uint64_t ticket, caf::message& payload, caf::error& err, bool) {
          auto finish = jobs_.take(ticket);
          ASSERT_TRUE(finish) << "ticket " << ticket;
          EXPECT_FALSE(jobs_.take(ticket)) << "a completion is taken once";
          finish(payload, err);
          value = payload.empty() ? 0 : payload.get_as<std::uint64_t>(0);
        },
        caf::after(20s) >> [] { ADD_FAILURE() << "no job_done within 20 s"; });
    return value;
  }

  worker_lanes lanes_{[] {}};
  off_loop_jobs jobs_{lanes_, backend_};
};

TEST_F(off_loop_jobs_test, EachCompletionRunsOnceWithItsJobsResult) {
  caf::scoped_actor self{sys_};
  std::map<std::uint64_t, std::uint64_t> seen;  // the value each completion was given
  for (std::uint64_t v : {7u, 9u})
    jobs_.post(
        caf::actor{self}, worker_lanes::general, [v] { return v; }, {}, completion::enqueued,
        [&seen, v](caf::message& m, caf::error&) { seen[v] = m.get_as<std::uint64_t>(0); }, false);
  EXPECT_EQ(jobs_.pending().size(), 2u) << "waiting until their job_done comes";
  EXPECT_EQ(finish_next(self), 7u);
  EXPECT_EQ(finish_next(self), 9u);
  EXPECT_EQ(seen, (std::map<std::uint64_t, std::uint64_t>{{7, 7}, {9, 9}}));
  EXPECT_TRUE(jobs_.pending().empty());
}

TEST_F(off_loop_jobs_test, AStreamOrderedJobFollowsAnUnfinishedOneOnItsStreamToItsLane) {
  caf::scoped_actor self{sys_};
  const stream_view s{reinterpret_cast<void*>(0x5)};
  const auto post = [&](std::size_t lane) {
    jobs_.post(
        caf::actor{self}, lane, [] { return this_thread(); }, s, completion::enqueued,
        [](caf::message&, caf::error&) {}, true);
  };
  post(2);
  post(3);  // the stream has an unfinished job on lane 2: it goes there
  const auto first = finish_next(self), second = finish_next(self);
  EXPECT_EQ(first, second);
  post(3);  // both finished: lane 3 now
  EXPECT_NE(finish_next(self), first);
}

TEST_F(off_loop_jobs_test, ABarriersCompletionRunsAfterEverythingQueuedBefore) {
  caf::scoped_actor self{sys_};
  std::vector<int> order;
  std::promise<void> open;  // the jobs run until the barrier is queued: still in flight then
  const auto gate = open.get_future().share();
  for (std::size_t lane : {worker_lanes::general, std::size_t{2}})
    jobs_.post(
        caf::actor{self}, lane,
        [gate] {
          gate.wait();
          return std::uint64_t{1};
        },
        {}, completion::enqueued, [&order](caf::message&, caf::error&) { order.push_back(1); },
        false);
  jobs_.barrier(caf::actor{self}, [&order](caf::message&, caf::error&) { order.push_back(2); });
  open.set_value();
  for (int i = 0; i < 3; ++i)
    (void)finish_next(self);
  EXPECT_EQ(order, (std::vector<int>{1, 1, 2}));
}

}  // namespace
}  // namespace uma::detail
