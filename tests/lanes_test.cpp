// Off-loop work (sys/worker_lanes.hpp, actors/managed_allocator.cpp): prefetches run on their
// destination's lane, a stream's operations keep their order, and flush waits for every lane. No
// sleeps: a held backend call (fault_injecting_backend::hold) keeps work in flight for exactly as
// long as a test needs. Part of uma_reliability_tests, so the TSan build runs it.

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <thread>
#include <utility>

#include <caf/event_based_actor.hpp>

#include <uma/memory/block_allocator.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include <uma/sys/worker_lanes.hpp>
#include "support/held_calls.hpp"
#include "support/reliability_fixture.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;

TEST(WorkerLanes, PickTheDestinationsLaneWhenTheyAgree) {
  const location dev1[] = {location::device(1), location::device(1)};
  const location host[] = {location::host(), location::host_numa(0)};
  const location mixed[] = {location::device(0), location::host()};
  EXPECT_EQ(worker_lanes::for_destinations(dev1), 3u);
  EXPECT_EQ(worker_lanes::for_destinations(host), 1u);
  EXPECT_EQ(worker_lanes::for_destinations(mixed), worker_lanes::general);
  EXPECT_EQ(worker_lanes::for_destinations({}), worker_lanes::general);
}

TEST(WorkerLanes, KeepAStreamOnOneLaneWhileItHasUnfinishedJobs) {
  worker_lanes lanes;
  int token = 0;
  const stream_view s{&token};
  EXPECT_EQ(lanes.begin_stream(3, s), 3u);
  EXPECT_EQ(lanes.begin_stream(1, s), 3u);   // follows the unfinished job
  EXPECT_EQ(lanes.begin_stream(1, {}), 1u);  // another stream is free to go elsewhere
  lanes.finish_stream(s);
  EXPECT_EQ(lanes.begin_stream(0, s), 3u);
  lanes.finish_stream(s);
  lanes.finish_stream(s);
  EXPECT_EQ(lanes.begin_stream(1, s), 1u);  // all finished: the preferred lane again
}

TEST(WorkerLanes, BarrierWaitsForEveryLane) {
  worker_lanes lanes;
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  std::atomic<bool> slow_done{false};
  lanes.post(3, [opened, &slow_done] {
    opened.wait();
    slow_done = true;
  });
  lanes.post(worker_lanes::general, [] {});
  EXPECT_EQ(lanes.started(), 2u);
  std::promise<bool> barrier;
  lanes.barrier([&] { barrier.set_value(slow_done.load()); });
  auto seen = barrier.get_future();
  EXPECT_EQ(seen.wait_for(0ms), std::future_status::timeout);  // lane 3 is still held
  gate.set_value();
  EXPECT_TRUE(seen.get());  // ran after the held job
  lanes.drain_and_stop();
}

using test::resume_on_exit;

class off_loop : public test::reliability_fixture {
 protected:
  /// A request sent to `pool_`'s allocator as a message (the facade runs some on the caller's
  /// thread), answered (or the test fails).
  template <class R, class... Ts>
  R ask(Ts... xs) {
    return test::ask<R>(sys_, pool_->handle(), xs...);
  }

  std::shared_ptr<fault_injecting_backend> faults_ =
      std::make_shared<fault_injecting_backend>(backend_);
  std::unique_ptr<client> pool_ = make_client(
      {.backend = {.instance = faults_},
       .memory = {
           .policy = allocation_policy::pool, .slab_bytes = 1 << 20, .max_pooled_block = 1 << 20}});
};

TEST_F(off_loop, AFailedSlabRepliesItsErrorAndTheNextRequestCarvesAgain) {
  // Under the pool policy a small request is a block: a miss carves a slab through the stack,
  // and a refused slab leaves nothing behind. A refusal is tried once more, on the general lane
  // behind the frees queued before it (they may be what the backend lacks): both fail here.
  faults_->inject({.op = backend_op::allocate, .nth = 1, .code = errc::out_of_memory});
  faults_->inject({.op = backend_op::allocate, .nth = 2, .code = errc::out_of_memory});
  UMA_EXPECT_ERRC((void)pool_->allocate<std::byte>(4096), errc::out_of_memory);
  auto s = pool_->stats();
  EXPECT_EQ(s.failures_of(errc::out_of_memory), 1u);
  EXPECT_EQ(s.live_regions, 0u);
  EXPECT_EQ(s.live_leases, 0u);
  EXPECT_EQ(s.reserved_bytes, 0u);
  auto ok = pool_->allocate<std::byte>(4096);
  EXPECT_TRUE(ok.valid());
  s = pool_->stats();
  EXPECT_EQ(s.live_leases, 1u);  // the block's slab
  EXPECT_EQ(s.live_regions, 1u);
  EXPECT_EQ(faults_->calls(backend_op::allocate), 3u);
}

TEST_F(off_loop, AHeldPrefetchDelaysItsStreamButNotOtherWork) {
  resume_on_exit guard{*faults_};
  auto r = pool_->allocate<std::byte>(64 * 1024);
  auto other = pool_->allocate<std::byte>(64 * 1024);
  faults_->hold(backend_op::prefetch);
  // Sent as a message, so that it runs on a lane (the facade's own prefetch runs on the
  // caller's thread: tests/caller_calls_test.cpp).
  auto p = std::async(std::launch::async, [&] {
    return ask<op_result>(prefetch_atom_v,
                          prefetch_request{{client::erase(r)}, {location::host()}});
  });
  ASSERT_TRUE(faults_->wait_for_held(10s));
  // Advice and attributes go on meanwhile on the general lane (sent as messages too).
  EXPECT_EQ(ask<op_result>(
                advise_atom_v,
                advise_request{{client::erase(other)}, advice::set_read_mostly, location::host()})
                .backend_ranges,
            1u);
  EXPECT_TRUE(ask<range_attributes>(attributes_atom_v, client::erase(other)).read_mostly);
  // A discard on the same (default) stream queues behind the held prefetch, on its lane.
  auto d = std::async(std::launch::async, [&] { return pool_->discard({client::erase(other)}); });
  for (int i = 0; i < 100000 && pool_->stats().pending_jobs < 2; ++i)
    std::this_thread::yield();
  EXPECT_EQ(pool_->stats().pending_jobs, 2u);
  EXPECT_EQ(faults_->calls(backend_op::discard), 0u);
  EXPECT_EQ(d.wait_for(0ms), std::future_status::timeout);
  faults_->resume();
  EXPECT_EQ(p.get().ranges, 1u);
  EXPECT_EQ(d.get().ranges, 1u);
  EXPECT_EQ(faults_->calls(backend_op::discard), 1u);
}

TEST_F(off_loop, AnAsyncPlanWhoseMovesOutlastItsSendGetsItsReply) {
  // The plan's placement is held on its lane until will_access_async has returned: the reply
  // comes after the pending_plan was built and moved (a copied ticket state once forgot it
  // there, and get() waited out the client's timeout; the H100's 64 MiB moves hit it always).
  resume_on_exit guard{*faults_};
  pool_->set_timeout(10s);
  auto r = pool_->allocate<std::byte>(64 * 1024);
  faults_->hold(backend_op::prefetch);
  auto plan = pool_->will_access_async({client::erase(r)}, 0, access_mode::write,
                                       residency_policy::migrate, {}, completion::complete);
  ASSERT_TRUE(faults_->wait_for_held(10s));
  auto kept = std::move(plan);
  faults_->resume();
  EXPECT_EQ(kept.get().placements, 1u);
  EXPECT_EQ(pool_->done_with({client::erase(r)}), 1u);
}

TEST_F(off_loop, AFlushAfterACompletedDiscardCountsTheCallersLastDrop) {
  // Issue 24: a discard replied "complete" from inside its lane job (the host backend runs the
  // stream callback at once) while the job still held a copy of the ref, so the caller's drop
  // after the reply was not the last, and a flush could count the region live. The lane is
  // held right after the reply: the caller's drop must already be the last one then.
  auto c = make_client({.backend = {.instance = faults_}});
  auto held = std::make_shared<std::atomic<bool>>(false);
  auto entered = std::make_shared<std::promise<void>>();
  const auto lane_held = entered->get_future();
  std::promise<void> go;
  const auto gate = go.get_future().share();
  struct release_lane {  // on every way out: no more holds, and a held lane goes on
    fault_injecting_backend& b;
    std::promise<void>& go;
    bool done = false;
    void now() {
      if (std::exchange(done, true))
        return;
      b.after_host_func({});
      go.set_value();
    }
    ~release_lane() { now(); }
  } lane{*faults_, go};
  faults_->after_host_func([held, entered, gate] {
    if (held->exchange(true))
      return;
    entered->set_value();
    gate.wait();
  });
  auto ref = client::erase(c->allocate<std::byte>(256 * 1024, {.label = "discarded"}));
  c->discard({ref}, {}, completion::complete);
  // The reply was sent from inside the lane job's host callback; the hook runs when that
  // returns, which may be after the reply reached us: wait until the lane is held there.
  ASSERT_EQ(lane_held.wait_for(10s), std::future_status::ready);
  ref = byte_ref{};  // the caller's drop, after the completed discard
  EXPECT_TRUE(c->regions().empty()) << "the lane's job still holds the discarded region";
  lane.now();
  const auto s = c->flush();
  EXPECT_EQ(s.allocations, 1u);
  EXPECT_EQ(s.releases, 1u);
  EXPECT_EQ(s.live_bytes, 0u);
  EXPECT_EQ(s.live_regions, 0u);
}

TEST_F(off_loop, AnActorThatGotAnAttributesReplyMakesTheLastDropOfItsBlock) {
  // The attributes job captured its ref as a copy of a `const byte_ref&`: a const member, which
  // moving the job copied, so the lane still held the ref after the reply, until the job ended.
  // An actor client that gets the reply runs in that moment: the allocator, idle, is resumed on
  // the lane's thread by job_done, and the actor its reply made ready runs right after it, there
  // (actors/detail/inline_unit.hpp). Its drop must then be the last one: an unadvised block
  // goes back to its list at once. (On a GPU, 1 run in 30 of
  // gpu_allocator.BlocksWorkWithKernelsPrefetchAndAdvice met it: the caller's flush drained
  // before the lane's drop of an advised block, which came back after the flush's reply.)
  resume_on_exit guard{*faults_};
  auto blocks = pool_->blocks();
  struct asker_state {
    byte_ref ref;
    std::promise<std::uint64_t> in_use_after_drop;
  };
  auto state = std::make_shared<asker_state>();
  state->ref = blocks->allocate(64 * 1024, 0, {});
  auto in_use = state->in_use_after_drop.get_future();
  faults_->hold(backend_op::attributes);
  sys_.spawn(
      [state, blocks, allocator = pool_->handle()](caf::event_based_actor* self, int) {
        self->request(allocator, caf::infinite, attributes_atom_v, state->ref)
            .then(
                [state, blocks](const range_attributes&) {
                  state->ref = byte_ref{};  // the asker's only ref: its last drop
                  state->in_use_after_drop.set_value(blocks->stats().blocks_in_use);
                },
                [state](caf::error&) { state->in_use_after_drop.set_value(~std::uint64_t{0}); });
      },
      0);
  ASSERT_TRUE(faults_->wait_for_held(10s));
  // A round trip after the request: the allocator is idle now, so job_done resumes it on the
  // lane (were it busy elsewhere, a release tick, the check would pass whatever the lane holds).
  (void)pool_->stats();
  faults_->resume();
  ASSERT_EQ(in_use.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(in_use.get(), 0u) << "the attributes job still held the block after its reply";
}

TEST_F(off_loop, AnAllocateOverTheQuotaWaitsForTheFreesOnTheirWayToTheBackend) {
  // A region's last drop frees it on the general lane; until that free ran the quota still
  // counts the region. An allocate the quota refuses on the actor's loop meanwhile must wait for
  // the free, not fail: the caller gave the memory back. (Eight threads allocating and
  // releasing 64 MiB each through the facade ran into the quota with ~190 frees queued.)
  resume_on_exit guard{*faults_};
  constexpr std::size_t big = std::size_t{32} << 20;  // above the block allocator's sizes
  auto direct =
      make_client({.backend = {.instance = faults_}, .memory = {.quota_bytes = big + big / 2}});
  faults_->hold(backend_op::free);
  auto first = direct->allocate<std::byte>(big);
  first.reset();
  ASSERT_TRUE(faults_->wait_for_held(10s));  // its free is on the lane, held there
  auto second = std::async(std::launch::async, [&] { return direct->allocate<std::byte>(big); });
  // Either the refusal comes back, or the allocate waits as a job on the lane behind the free
  // (two jobs then: the held free, running, and the allocation).
  while (second.wait_for(0ms) != std::future_status::ready && direct->stats().pending_jobs < 2) {
  }
  faults_->resume();
  const auto ref = second.get();  // throws quota_exceeded where it was refused
  EXPECT_EQ(ref.size(), big);
  EXPECT_EQ(direct->flush().live_regions, 1u);
}

TEST_F(off_loop, ABlockWhoseSlabTheQuotaRefusesWaitsForTheFreesOnTheirWayToo) {
  // Under the pool policy a small request is a block; a miss carves a slab, which the quota may
  // refuse while a region given back is still on its way to the backend: the same wait.
  resume_on_exit guard{*faults_};
  constexpr std::size_t big = std::size_t{32} << 20;  // a direct region
  auto pool = make_client({.backend = {.instance = faults_},
                           .memory = {.policy = allocation_policy::pool,
                                      .quota_bytes = big + (std::size_t{1} << 20),
                                      .slab_bytes = std::size_t{4} << 20}});
  faults_->hold(backend_op::free);
  auto first = pool->allocate<std::byte>(big);
  first.reset();
  ASSERT_TRUE(faults_->wait_for_held(10s));
  auto block = std::async(std::launch::async, [&] { return pool->allocate<std::byte>(65536); });
  while (block.wait_for(0ms) != std::future_status::ready && pool->stats().pending_jobs < 2) {
  }
  faults_->resume();
  const auto ref = block.get();  // throws quota_exceeded where it was refused
  EXPECT_EQ(ref.size(), 65536u);
  const auto s = pool->flush();
  EXPECT_EQ(s.live_leases, 1u);  // its slab, the one region
  EXPECT_EQ(s.live_regions, 1u);
  EXPECT_EQ(pool->blocks()->stats().blocks_in_use, 1u);
}

TEST_F(off_loop, AStopWhileAnAllocateWaitsBehindTheFreesAnswersItAndLeavesNothing) {
  // The waiting allocate is a job on the general lane: a stop meanwhile answers it
  // allocator_stopped, and the memory the job takes once the lane runs it is freed.
  resume_on_exit guard{*faults_};
  constexpr std::size_t big = std::size_t{32} << 20;
  auto direct =
      make_client({.backend = {.instance = faults_}, .memory = {.quota_bytes = big + big / 2}});
  auto witness = direct->allocate<std::byte>(4096);
  faults_->hold(backend_op::free);
  auto first = direct->allocate<std::byte>(big);
  first.reset();
  ASSERT_TRUE(faults_->wait_for_held(10s));
  auto a = std::async(std::launch::async, [&] {
    try {
      (void)direct->allocate<std::byte>(big);
      return errc{};
    } catch (const error& e) {
      return e.code();
    }
  });
  while (a.wait_for(0ms) != std::future_status::ready && direct->stats().pending_jobs < 2) {
  }
  ASSERT_EQ(a.wait_for(0ms), std::future_status::timeout);  // waiting behind the held free
  auto stopper = std::async(std::launch::async, [&] { direct->stop(); });
  for (int i = 0; i < 10'000'000 && witness.valid(); ++i)  // post_stop has begun
    std::this_thread::yield();
  ASSERT_FALSE(witness.valid());
  faults_->resume();
  stopper.get();
  EXPECT_EQ(a.get(), errc::allocator_stopped);
  EXPECT_EQ(backend_->counters().live_allocations, 0u);  // the job's late region went back
  EXPECT_EQ(backend_->counters().bad_frees, 0u);
}

TEST_F(off_loop, AnAllocatorWhoseLastHandleEndsInsideALaneJobStopsCleanly) {
  // The lane's job holds a handle to the allocator; when every other handle is gone, the job's
  // may be the last, and post_stop then runs on the lane's own thread, which must not wait for
  // itself. Which thread ends the allocator is a race: repeat, and require a clean stop each time.
  for (int round = 0; round < 20; ++round) {
    resume_on_exit guard{*faults_};
    auto handle = spawn_allocator(sys_, {.backend = {.instance = faults_}});
    byte_ref ref;
    {
      client c(sys_, handle);  // does not own the allocator
      ref = client::erase(c.allocate<std::byte>(4096));
    }
    faults_->hold(backend_op::prefetch);
    caf::anon_send(handle, prefetch_atom_v, prefetch_request{{ref}, {location::host()}});
    ASSERT_TRUE(faults_->wait_for_held(10s));
    handle = nullptr;  // now only the lane's job holds the allocator
    faults_->resume();
    for (int i = 0; i < 10'000'000 && !ref.stop_info(); ++i)
      std::this_thread::yield();
    ASSERT_TRUE(ref.stop_info().has_value()) << "round " << round;
    EXPECT_FALSE(ref.valid());
    EXPECT_EQ(ref.stop_info()->regions_freed, 1u);
  }
  EXPECT_EQ(backend_->counters().bad_frees, 0u);
}

}  // namespace
}  // namespace uma
