// Calls on the caller's thread (messages/caller_calls.hpp, actors/detail/incarnation.hpp): the
// facade's prefetch, advise, attributes and stats run on the calling thread under the
// incarnation's core lock, answer as the request sent as a message does, go as a message where
// the actor's order needs it, wait at most the client's timeout, and end with the incarnation.
// No sleeps: a held backend call (fault_injecting_backend::hold) keeps a call in flight for as
// long as a test needs.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include "support/actor_fixture.hpp"
#include "support/held_calls.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;

using test::await_pending_jobs;
using test::resume_on_exit;

class caller_calls_test : public test::actor_fixture {
 protected:
  /// The request sent to `c`'s allocator as a message, answered (or the test fails).
  template <class R, class... Ts>
  R ask(client& c, Ts... xs) {
    return test::ask<R>(sys_, c.handle(), xs...);
  }

  /// A client of a one-device allocator whose backend (`devfaults_`) can hold calls.
  std::unique_ptr<client> device_client() {
    auto cfg = one_device_config();
    devfaults_ = std::make_shared<fault_injecting_backend>(cfg.backend.instance);
    cfg.backend.instance = devfaults_;
    auto c = make_client(cfg);
    c->set_timeout(10s);
    return c;
  }

  std::shared_ptr<fault_injecting_backend> faults_ =
      std::make_shared<fault_injecting_backend>(backend_);
  std::unique_ptr<client> c_ = make_client({.backend = {.instance = faults_}});
  std::shared_ptr<fault_injecting_backend> devfaults_;
};

TEST_F(caller_calls_test, AHeldPrefetchRunsOnTheCallersThreadAndHoldsNoLane) {
  resume_on_exit guard{*faults_};
  c_->set_timeout(10s);
  auto r = c_->allocate<std::byte>(64 * 1024);
  faults_->hold(backend_op::prefetch);
  auto p = std::async(std::launch::async, [&] { return c_->prefetch(r, location::host()); });
  ASSERT_TRUE(faults_->wait_for_held(10s));
  // The actor and every lane are free meanwhile: a flush (a barrier across the lanes) returns.
  // Were the prefetch a lane's job, the flush would wait for it (and time out here).
  const auto s = c_->flush();
  EXPECT_EQ(s.pending_jobs, 0u);
  EXPECT_EQ(s.prefetches, 0u);  // counted once the backend call returned
  faults_->resume();
  EXPECT_EQ(p.get().ranges, 1u);
  EXPECT_EQ(c_->stats().prefetches, 1u);
}

TEST_F(caller_calls_test, AHeldAttributesCallRunsOnTheCallersThread) {
  resume_on_exit guard{*faults_};
  c_->set_timeout(10s);
  auto r = c_->allocate<std::byte>(64 * 1024);
  faults_->hold(backend_op::attributes);
  auto a = std::async(std::launch::async, [&] { return c_->attributes(r); });
  ASSERT_TRUE(faults_->wait_for_held(10s));
  // On the message path the call would hold the general lane, and the flush wait for it.
  EXPECT_EQ(c_->flush().pending_jobs, 0u);
  faults_->resume();
  EXPECT_FALSE(a.get().read_mostly);
}

TEST_F(caller_calls_test, AHeldRegionAllocationRunsOnTheCallersThread) {
  resume_on_exit guard{*faults_};
  c_->set_timeout(10s);
  (void)c_->stats();  // the calls are fetched first (one message)
  faults_->hold(backend_op::allocate);
  auto a = std::async(std::launch::async, [&] {
    return c_->allocate<std::byte>(std::size_t{32} << 20, {.label = "held"});
  });
  ASSERT_TRUE(faults_->wait_for_held(10s));
  // The actor is free meanwhile (on the message path it would run the held allocate).
  EXPECT_EQ(c_->flush().live_regions, 0u);
  faults_->resume();
  const auto ref = a.get();
  ASSERT_TRUE(ref.valid());
  const auto report = c_->regions();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].label, "held");
  EXPECT_EQ(report[0].bytes, std::size_t{32} << 20);
  EXPECT_EQ(c_->stats().allocations, 1u);
}

TEST_F(caller_calls_test, ARefusedRegionIsTriedOnceMoreBehindTheFreesOnTheirWay) {
  // As the actor does: the quota refuses while a region given back is still on its way to the
  // backend (its free held on the general lane); the one more try waits behind that free.
  resume_on_exit guard{*faults_};
  constexpr std::size_t big = std::size_t{32} << 20;
  auto c =
      make_client({.backend = {.instance = faults_}, .memory = {.quota_bytes = big + big / 2}});
  c->set_timeout(10s);
  auto first = c->allocate<std::byte>(big);
  faults_->hold(backend_op::free);
  first.reset();
  auto second = std::async(std::launch::async, [&] { return c->allocate<std::byte>(big); });
  ASSERT_TRUE(faults_->wait_for_held(10s));  // the free, on the general lane
  EXPECT_EQ(second.wait_for(0ms), std::future_status::timeout);
  faults_->resume();
  const auto ref = second.get();
  EXPECT_EQ(ref.size(), big);
  // The first and the retry: the quota (the stack's) refused the other try before the backend.
  EXPECT_EQ(faults_->calls(backend_op::allocate), 2u);
  EXPECT_EQ(c->stats().failures_of(errc::quota_exceeded), 0u);
}

TEST_F(caller_calls_test, AdviceThatReachesTheRuntimeKeepsTheOrderItWasRecordedIn) {
  // A message's advice waits on the general lane (behind a held discard); the facade's opposite
  // advice on the same region must not overtake it: what the allocator records of the region's
  // advice is what the runtime ends with, so later advice is elided only when it may be.
  resume_on_exit guard{*faults_};
  c_->set_timeout(10s);
  auto x = c_->allocate<std::byte>(64 * 1024);
  auto other = c_->allocate<std::byte>(64 * 1024);
  faults_->hold(backend_op::discard);
  auto d = std::async(std::launch::async, [&] { return c_->discard({client::erase(other)}); });
  ASSERT_TRUE(faults_->wait_for_held(10s));
  auto set = std::async(std::launch::async, [&] {
    return ask<op_result>(
        *c_, advise_atom_v,
        advise_request{{client::erase(x)}, advice::set_read_mostly, location::host()});
  });
  ASSERT_EQ(await_pending_jobs(*c_, 2), 2u);
  auto unset =
      std::async(std::launch::async, [&] { return c_->advise(x, advice::unset_read_mostly); });
  EXPECT_EQ(await_pending_jobs(*c_, 3), 3u);  // behind the set, on the general lane
  faults_->resume();
  EXPECT_EQ(set.get().backend_ranges, 1u);
  EXPECT_EQ(unset.get().backend_ranges, 1u);
  (void)d.get();
  EXPECT_FALSE(c_->attributes(x).read_mostly);
  EXPECT_EQ(c_->advise(x, advice::unset_read_mostly).backend_ranges, 0u);  // known: elided
  EXPECT_EQ(c_->advise(x, advice::set_read_mostly).backend_ranges, 1u);
  EXPECT_TRUE(c_->attributes(x).read_mostly);
}

TEST_F(caller_calls_test, AnswersAsTheRequestSentAsAMessage) {
  auto r = c_->allocate<float>(1000);
  const auto ref = client::erase(r);
  // Advice: the first one through the actor, the same again on this thread is known to change
  // nothing (no backend call); then the other way round.
  const auto sent = ask<op_result>(
      *c_, advise_atom_v, advise_request{{ref}, advice::set_read_mostly, location::host()});
  EXPECT_EQ(sent.backend_ranges, 1u);
  const auto here = c_->advise(r, advice::set_read_mostly);
  EXPECT_EQ(here.ranges, 1u);
  EXPECT_EQ(here.backend_ranges, 0u);
  EXPECT_EQ(faults_->calls(backend_op::advise), 1u);
  EXPECT_EQ(c_->advise(r, advice::set_preferred_location).backend_ranges, 1u);
  const auto again = ask<op_result>(
      *c_, advise_atom_v, advise_request{{ref}, advice::set_preferred_location, location::host()});
  EXPECT_EQ(again.backend_ranges, 0u);
  EXPECT_EQ(faults_->calls(backend_op::advise), 2u);
  // Attributes, prefetch and stats.
  EXPECT_EQ(c_->attributes(r), ask<range_attributes>(*c_, attributes_atom_v, ref));
  const auto pf = c_->prefetch(r, location::host());
  EXPECT_EQ(pf, ask<op_result>(*c_, prefetch_atom_v, prefetch_request{{ref}, {location::host()}}));
  const auto dp = c_->discard_prefetch({ref}, {location::host()});
  EXPECT_EQ(dp, ask<op_result>(*c_, discard_prefetch_atom_v,
                               prefetch_request{{ref}, {location::host()}}));
  const auto s = c_->stats();
  EXPECT_EQ(s, ask<allocator_stats>(*c_, stats_atom_v));
  EXPECT_EQ(s.prefetches, 4u);
  EXPECT_EQ(s.discards, 2u);
  EXPECT_EQ(s.advice_elided, 2u);
}

TEST_F(caller_calls_test, RefusesBadRequestsAsTheActorDoesAndCountsThem) {
  auto r = c_->allocate<float>(1000);
  client other(sys_, host_config());
  auto foreign = other.allocate<float>(10);
  UMA_EXPECT_ERRC(c_->prefetch(byte_ref{}, location::host()), errc::invalid_argument);
  UMA_EXPECT_ERRC(c_->prefetch(foreign, location::host()), errc::invalid_argument);
  UMA_EXPECT_ERRC(c_->prefetch({client::erase(r)}, {location::host(), location::host()}),
                  errc::invalid_argument);  // two locations for one ref
  UMA_EXPECT_ERRC(c_->advise(foreign, advice::set_read_mostly), errc::invalid_argument);
  UMA_EXPECT_ERRC((void)c_->attributes(foreign), errc::invalid_argument);
  // A failed backend call is counted under its code, and changes nothing else.
  faults_->inject({.op = backend_op::attributes, .nth = 1, .code = errc::backend_error});
  UMA_EXPECT_ERRC((void)c_->attributes(r), errc::backend_error);
  const auto s = c_->stats();
  EXPECT_EQ(s.failures_of(errc::invalid_argument), 5u);
  EXPECT_EQ(s.failures_of(errc::backend_error), 1u);
  EXPECT_EQ(s.prefetches, 0u);
  EXPECT_EQ(faults_->calls(backend_op::prefetch), 0u);
}

TEST_F(caller_calls_test, StatsAfterALastDropCountWhatTheActorsDrainChanged) {
  // The actor drains queued releases before it answers (a freed region leaves the residency
  // account there); a caller call that would read the counters with a release still queued
  // goes to the actor instead.
  auto c = make_client(one_device_config());
  for (int i = 0; i < 50; ++i) {
    auto r = c->allocate<std::byte>(64 * 1024);
    (void)c->will_access({client::erase(r)}, 0, access_mode::write);
    EXPECT_EQ(c->stats().resident_bytes, 64u * 1024u);
    r.reset();
    EXPECT_EQ(c->stats().resident_bytes, 0u) << "round " << i;
  }
}

TEST_F(caller_calls_test, AStreamsUnfinishedLaneJobKeepsALaterPrefetchBehindIt) {
  // A prefetch sent as a message runs on a lane, held there: the facade's prefetch on the same
  // (default) stream goes to the actor and queues behind it, as it would have before.
  resume_on_exit guard{*faults_};
  c_->set_timeout(10s);
  auto a = c_->allocate<std::byte>(64 * 1024);
  auto b = c_->allocate<std::byte>(64 * 1024);
  faults_->hold(backend_op::prefetch);
  auto sent = std::async(std::launch::async, [&] {
    return ask<op_result>(*c_, prefetch_atom_v,
                          prefetch_request{{client::erase(a)}, {location::host()}});
  });
  ASSERT_TRUE(faults_->wait_for_held(10s));
  auto p = std::async(std::launch::async, [&] { return c_->prefetch(b, location::host()); });
  // A job behind the held one (on this thread, the prefetch would be held in the backend and
  // no second job would come: bounded, so that the test fails rather than hangs).
  EXPECT_EQ(await_pending_jobs(*c_, 2), 2u);
  faults_->resume();
  EXPECT_EQ(sent.get().ranges, 1u);
  EXPECT_EQ(p.get().ranges, 1u);
  EXPECT_EQ(faults_->calls(backend_op::prefetch), 2u);
}

TEST_F(caller_calls_test, APlanSentAheadKeepsLaterCallsBehindIt) {
  // A plan's placement runs on the device's lane, held there, its reply not taken yet: the
  // client's later calls go to the actor, behind it, as they would have before.
  auto c = device_client();
  auto& devfaults = devfaults_;
  resume_on_exit guard{*devfaults};
  auto a = c->allocate<std::byte>(64 * 1024);
  auto b = c->allocate<std::byte>(64 * 1024);
  devfaults->hold(backend_op::prefetch);
  auto plan = c->will_access_async({client::erase(a)}, 0, access_mode::write,
                                   residency_policy::migrate, {}, completion::complete);
  ASSERT_TRUE(devfaults->wait_for_held(10s));
  auto p = std::async(std::launch::async, [&] { return c->prefetch(b, location::host()); });
  // A job behind the placement (on this thread, the prefetch would be held in the backend and
  // no second job would come: bounded, so that the test fails rather than hangs).
  EXPECT_EQ(await_pending_jobs(*c, 2), 2u);
  EXPECT_EQ(p.wait_for(0ms), std::future_status::timeout);
  devfaults->resume();
  EXPECT_EQ(plan.get().placements, 1u);
  EXPECT_EQ(p.get().ranges, 1u);
  EXPECT_EQ(devfaults->calls(backend_op::prefetch), 2u);
}

TEST_F(caller_calls_test, ADroppedPlanStillKeepsLaterCallsBehindIt) {
  // A plan whose reply nobody waits for any more is still on its way: until its reply comes,
  // the client's calls go to the actor, behind it.
  auto c = device_client();
  auto& devfaults = devfaults_;
  resume_on_exit guard{*devfaults};
  auto a = c->allocate<std::byte>(64 * 1024);
  auto b = c->allocate<std::byte>(64 * 1024);
  devfaults->hold(backend_op::prefetch);
  {
    auto plan =
        c->will_access_async({client::erase(a)}, 0, access_mode::write, residency_policy::migrate);
    ASSERT_TRUE(devfaults->wait_for_held(10s));
  }  // dropped unanswered
  auto p = std::async(std::launch::async, [&] { return c->prefetch(b, location::device(0)); });
  EXPECT_EQ(await_pending_jobs(*c, 2), 2u);
  devfaults->resume();
  EXPECT_EQ(p.get().ranges, 1u);
  // Its reply came (and was dropped): calls run on the caller's thread again.
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (c->stats().pending_jobs != 0 && std::chrono::steady_clock::now() < give_up) {
  }
  devfaults->hold(backend_op::prefetch);
  auto q = std::async(std::launch::async, [&] { return c->prefetch(b, location::host()); });
  ASSERT_TRUE(devfaults->wait_for_held(10s));
  EXPECT_EQ(c->flush().pending_jobs, 0u);
  devfaults->resume();
  EXPECT_EQ(q.get().ranges, 1u);
}

TEST_F(caller_calls_test, ACallWaitsForTheLockAtMostTheTimeout) {
  resume_on_exit guard{*faults_};
  (void)c_->stats();  // the calls are fetched (one message) while the actor is idle
  faults_->hold(backend_op::allocate);
  // Sent as a message, so that the actor runs the held allocate, its lock held.
  auto a = std::async(std::launch::async, [&] {
    return ask<byte_ref>(*c_, allocate_atom_v, allocate_request{4096, 1});
  });
  ASSERT_TRUE(faults_->wait_for_held(10s));
  c_->set_timeout(50ms);
  UMA_EXPECT_ERRC((void)c_->stats(), errc::timeout);
  faults_->resume();
  const auto ref = a.get();
  EXPECT_TRUE(ref.valid());
  c_->set_timeout(10s);
  EXPECT_EQ(c_->stats().live_regions, 1u);
}

TEST_F(caller_calls_test, AStopWaitsForACallersBackendCallBeforeItFrees) {
  resume_on_exit guard{*faults_};
  auto c = std::make_unique<client>(sys_, allocator_config{.backend = {.instance = faults_}});
  c->set_max_block_bytes(0);
  auto r = c->allocate<std::byte>(64 * 1024);
  faults_->hold(backend_op::prefetch);
  auto p = std::async(std::launch::async, [&] { return c->prefetch(r, location::host()); });
  ASSERT_TRUE(faults_->wait_for_held(10s));
  auto stopped = std::async(std::launch::async, [&] { return c->stop(); });
  while (r.valid()) {  // the stop has begun: refs went inert
  }
  // A negative, so bounded: a stop that did not wait would be done well within this.
  EXPECT_EQ(stopped.wait_for(500ms), std::future_status::timeout);
  EXPECT_EQ(faults_->calls(backend_op::free), 0u) << "freed under a caller's backend call";
  faults_->resume();
  UMA_EXPECT_ERRC(p.get(), errc::allocator_stopped);  // issued, but the stop came first
  const auto report = stopped.get();
  ASSERT_TRUE(report);
  EXPECT_EQ(report->stop.regions_freed, 1u);
  EXPECT_EQ(faults_->calls(backend_op::free), 1u);
  UMA_EXPECT_ERRC(c->stats(), errc::allocator_stopped);
}

TEST_F(caller_calls_test, AStopAndACallersFailingBackendCallDoNotWaitForEachOther) {
  // post_stop holds the core lock while it waits for the calls whose backend call runs: a call
  // that fails must leave that count before it takes the lock to count its failure (it once
  // waited for the lock there, and the stop for it, until the client's timeout).
  resume_on_exit guard{*faults_};
  auto c = std::make_unique<client>(sys_, allocator_config{.backend = {.instance = faults_}});
  c->set_max_block_bytes(0);
  c->set_timeout(20s);
  auto r = c->allocate<std::byte>(64 * 1024);
  faults_->inject({.op = backend_op::allocate, .nth = 1, .code = errc::backend_error});
  faults_->hold(backend_op::allocate);
  auto a =
      std::async(std::launch::async, [&] { return c->allocate<std::byte>(std::size_t{32} << 20); });
  ASSERT_TRUE(faults_->wait_for_held(10s));
  auto stopped = std::async(std::launch::async, [&] { return c->stop(); });
  while (r.valid()) {  // the stop has begun; it waits for the held call
  }
  faults_->resume();
  ASSERT_EQ(stopped.wait_for(10s), std::future_status::ready) << "the stop waited for the call";
  UMA_EXPECT_ERRC(a.get(), errc::backend_error);
  const auto report = stopped.get();
  ASSERT_TRUE(report);
  EXPECT_EQ(report->stop.regions_freed, 1u);
}

TEST_F(caller_calls_test, AFatalFailureOnTheCallersThreadEndsTheIncarnation) {
  auto r = c_->allocate<std::byte>(64 * 1024);
  faults_->inject(
      {.op = backend_op::prefetch, .nth = 1, .code = errc::context_lost, .fatal = true});
  UMA_EXPECT_ERRC(c_->prefetch(r, location::host()), errc::context_lost);
  caf::scoped_actor self{sys_};
  self->wait_for(c_->handle());  // it quits, as it does for a lane's fatal failure
  UMA_EXPECT_ERRC(c_->stats(), errc::allocator_stopped);
  EXPECT_FALSE(r.valid());
}

TEST_F(caller_calls_test, ARestartGivesTheNewIncarnationsCalls) {
  supervisor_config cfg;
  cfg.allocator.backend.instance = faults_;
  cfg.backoff_initial = 0ms;
  client c(sys_, cfg);
  c.set_max_block_bytes(0);
  auto old_ref = c.allocate<std::byte>(4096);
  EXPECT_EQ(c.stats().generation, 1u);
  caf::scoped_actor self{sys_};
  std::uint64_t generation = 0;
  self->request(*c.supervisor(), 20s, restart_atom_v)
      .receive([&](std::uint64_t g) { generation = g; },
               [&](caf::error& e) { ADD_FAILURE() << sys_.render(e); });
  EXPECT_EQ(generation, 2u);
  EXPECT_EQ(c.stats().generation, 2u);  // the old calls refuse; the new ones answer
  auto fresh = c.allocate<std::byte>(4096);
  EXPECT_EQ(c.prefetch(fresh, location::host()).ranges, 1u);
  EXPECT_EQ(c.advise(fresh, advice::set_read_mostly).backend_ranges, 1u);
  UMA_EXPECT_ERRC(c.prefetch(old_ref, location::host()), errc::allocator_stopped);
  EXPECT_EQ(c.stats().inert_refusals, 1u);
}

}  // namespace
}  // namespace uma
