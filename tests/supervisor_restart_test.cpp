// Explicit restarts and restart observers (actors/allocator_supervisor.hpp): a `restart` request
// replaces the incarnation on purpose, and subscribed observers hear of every new incarnation
// and of the supervisor's end, exactly once each.

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include <caf/after.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include "support/actor_fixture.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;

class supervisor_restart : public test::actor_fixture {
 protected:
  allocator_supervisor_actor start(supervisor_config cfg = {}) {
    cfg.allocator.backend.instance = faults_;
    cfg.backoff_initial = 0ms;
    sup_ = spawn_supervisor(sys_, std::move(cfg));
    return sup_;
  }

  /// `self` as a restart observer.
  static restart_observer_actor observer(caf::scoped_actor& self) {
    return caf::actor_cast<restart_observer_actor>(self);
  }

  /// A request to the supervisor from `self`, answered (or the test fails).
  template <class R, class... Ts>
  R ask(caf::scoped_actor& self, Ts... xs) {
    R out{};
    self->request(sup_, 20s, xs...)
        .receive([&](R& r) { out = std::move(r); },
                 [&](caf::error& e) { ADD_FAILURE() << sys_.render(e); });
    return out;
  }

  /// The next restart event for `self`, waiting (bounded) for it to arrive.
  restart_event next_event(caf::scoped_actor& self) {
    restart_event out;
    self->receive([&](restarted_atom, restart_event& e) { out = std::move(e); },
                  caf::after(20s) >> [] { ADD_FAILURE() << "no restart event within 20 s"; });
    return out;
  }

  /// Every restart event the supervisor sent `self` before answering one more request from it:
  /// a mailbox is FIFO, so once that reply is in, so is every earlier event.
  std::vector<restart_event> drain(caf::scoped_actor& self) {
    (void)ask<supervision_stats>(self, supervision_atom_v);
    return take_events(self);
  }

  /// The restart events already in `self`'s mailbox.
  static std::vector<restart_event> take_events(caf::scoped_actor& self) {
    std::vector<restart_event> out;
    for (bool more = true; more;)
      self->receive([&](restarted_atom, restart_event& e) { out.push_back(std::move(e)); },
                    caf::after(0s) >> [&] { more = false; });
    return out;
  }

  std::shared_ptr<fault_injecting_backend> faults_ =
      std::make_shared<fault_injecting_backend>(backend_);
  allocator_supervisor_actor sup_;
};

TEST_F(supervisor_restart, ARestartRequestReplacesTheIncarnationAndRepliesItsGeneration) {
  client c(sys_, start());
  c.set_max_block_bytes(0);  // the message path (regions, quota)
  caf::scoped_actor self{sys_};
  auto old_ref = c.allocate<float>(64);
  EXPECT_EQ(c.quota(1 << 20), 1u << 20);
  EXPECT_EQ(ask<std::uint64_t>(self, restart_atom_v), 2u);
  // The old incarnation's post_stop ran: its refs are inert and it freed their region.
  EXPECT_FALSE(old_ref.valid());
  ASSERT_TRUE(old_ref.stop_info());
  EXPECT_EQ(old_ref.stop_info()->regions_freed, 1u);
  UMA_EXPECT_ERRC(c.prefetch(old_ref, location::host()), errc::allocator_stopped);
  auto fresh = c.allocate<float>(64);
  EXPECT_EQ(fresh.generation(), 2u);
  EXPECT_EQ(c.quota(), 1u << 20);  // the quota set before the restart holds in generation 2
  const auto s = query_supervision(sys_, sup_);
  EXPECT_EQ(s.current_generation, 2u);
  EXPECT_EQ(s.state, supervisor_state::running);
  EXPECT_EQ(s.requested_restarts, 1u);
  EXPECT_EQ(s.restarts, 0u);  // failures only
  EXPECT_TRUE(s.backoffs_ms.empty());
  ASSERT_EQ(s.generations.size(), 2u);
  EXPECT_FALSE(s.generations[0].alive);
  EXPECT_EQ(s.generations[0].regions_freed, 1u);
  EXPECT_EQ(s.generations[0].exit_reason, "restart requested");
  fresh.reset();
  old_ref.reset();
  c.stop();
  EXPECT_EQ(backend_->counters().frees, backend_->counters().allocations);
}

TEST_F(supervisor_restart, RequestedRestartsDoNotCountAgainstTheRestartIntensity) {
  supervisor_config cfg;
  cfg.max_restarts = 1;
  client c(sys_, start(cfg));
  c.set_max_block_bytes(0);  // the message path (regions, quota)
  caf::scoped_actor self{sys_};
  for (std::uint64_t gen = 2; gen <= 5; ++gen)
    EXPECT_EQ(ask<std::uint64_t>(self, restart_atom_v), gen);
  // One failure is still within the intensity of 1.
  EXPECT_EQ(ask<std::uint64_t>(self, subscribe_atom_v, observer(self)), 5u);
  faults_->inject({backend_op::allocate, 1, errc::context_lost, false, true});
  UMA_EXPECT_ERRC((void)c.allocate<float>(8), errc::context_lost);
  EXPECT_EQ(next_event(self).generation_after, 6u);
  EXPECT_EQ(c.allocate<float>(8).generation(), 6u);
  const auto s = query_supervision(sys_, sup_);
  EXPECT_EQ(s.requested_restarts, 4u);
  EXPECT_EQ(s.restarts, 1u);
  c.stop();
}

TEST_F(supervisor_restart, AnObserverHearsExactlyOneEventPerRestart) {
  client c(sys_, start());
  c.set_max_block_bytes(0);  // the message path (regions, quota)
  caf::scoped_actor self{sys_};
  EXPECT_EQ(ask<std::uint64_t>(self, subscribe_atom_v, observer(self)), 1u);
  EXPECT_EQ(ask<std::uint64_t>(self, subscribe_atom_v, observer(self)), 1u);  // idempotent
  EXPECT_EQ(query_supervision(sys_, sup_).observers, 1u);

  // A crash: a lost context kills generation 1; the event comes once generation 2 serves.
  auto ref = c.allocate<float>(16);
  faults_->inject({backend_op::prefetch, 1, errc::context_lost});
  UMA_EXPECT_ERRC(c.prefetch(ref, location::host()), errc::context_lost);
  const auto crash = next_event(self);
  EXPECT_EQ(crash.generation_before, 1u);
  EXPECT_EQ(crash.generation_after, 2u);
  EXPECT_EQ(crash.cause, restart_cause::failure);
  EXPECT_EQ(crash.reason.category(), error_category);
  EXPECT_EQ(crash.reason.code(), static_cast<std::uint8_t>(errc::context_lost));

  // An explicit restart.
  EXPECT_EQ(ask<std::uint64_t>(self, restart_atom_v), 3u);
  const auto events = drain(self);
  ASSERT_EQ(events.size(), 1u);  // the crash was heard once, the restart once
  EXPECT_EQ(events[0].generation_before, 2u);
  EXPECT_EQ(events[0].generation_after, 3u);
  EXPECT_EQ(events[0].cause, restart_cause::requested);
  EXPECT_FALSE(events[0].reason);

  // Stopping: one last event, no incarnation after it.
  c.stop();
  const auto last = take_events(self);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].cause, restart_cause::stopped);
  EXPECT_EQ(last[0].generation_before, 3u);
  EXPECT_EQ(last[0].generation_after, 0u);
}

TEST_F(supervisor_restart, AnUnsubscribedObserverHearsNothing) {
  client c(sys_, start());
  c.set_max_block_bytes(0);  // the message path (regions, quota)
  caf::scoped_actor self{sys_};
  EXPECT_EQ(ask<std::uint64_t>(self, subscribe_atom_v, observer(self)), 1u);
  EXPECT_TRUE(ask<bool>(self, unsubscribe_atom_v, observer(self)));
  EXPECT_FALSE(ask<bool>(self, unsubscribe_atom_v, observer(self)));
  EXPECT_EQ(ask<std::uint64_t>(self, restart_atom_v), 2u);
  EXPECT_TRUE(drain(self).empty());
  EXPECT_EQ(query_supervision(sys_, sup_).observers, 0u);
  c.stop();
  EXPECT_TRUE(take_events(self).empty());
}

TEST_F(supervisor_restart, ADeadObserverIsForgotten) {
  client c(sys_, start());
  c.set_max_block_bytes(0);  // the message path (regions, quota)
  caf::scoped_actor self{sys_};
  // One (unused) spawn argument: CAF 0.17 dereferences a null argument tuple when a function
  // actor is spawned with none (UBSan stops on it).
  auto dead = sys_.spawn(
      [](restart_observer_actor::pointer, int) -> restart_observer_actor::behavior_type {
        return {[](restarted_atom, const restart_event&) {}};
      },
      0);
  EXPECT_EQ(ask<std::uint64_t>(self, subscribe_atom_v, dead), 1u);
  EXPECT_EQ(ask<std::uint64_t>(self, subscribe_atom_v, observer(self)), 1u);
  EXPECT_EQ(query_supervision(sys_, sup_).observers, 2u);
  self->send_exit(dead, caf::exit_reason::kill);
  self->wait_for(dead);
  // The supervisor learns of it through its monitor (a down message, asynchronously).
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  auto s = query_supervision(sys_, sup_);
  while (s.observers != 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
    s = query_supervision(sys_, sup_);
  }
  EXPECT_EQ(s.observers, 1u);
  dead = nullptr;
  // Restarts go on, and the live observer still hears them.
  EXPECT_EQ(ask<std::uint64_t>(self, restart_atom_v), 2u);
  const auto events = drain(self);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].generation_after, 2u);
  c.stop();
}

TEST_F(supervisor_restart, AStoppedSupervisorRefusesRestartsAndSubscriptions) {
  client c(sys_, start());
  c.set_max_block_bytes(0);  // the message path (regions, quota)
  caf::scoped_actor self{sys_};
  EXPECT_EQ(ask<std::uint64_t>(self, subscribe_atom_v, observer(self)), 1u);
  faults_->inject({backend_op::allocate, 1, errc::unrecoverable, false, true});
  UMA_EXPECT_ERRC((void)c.allocate<float>(8), errc::unrecoverable);
  const auto stopped = next_event(self);
  EXPECT_EQ(stopped.cause, restart_cause::stopped);
  EXPECT_EQ(stopped.generation_before, 1u);
  EXPECT_EQ(stopped.reason.code(), static_cast<std::uint8_t>(errc::unrecoverable));
  for (auto req : {0, 1}) {
    caf::error err;
    auto on_error = [&](caf::error& e) { err = std::move(e); };
    if (req == 0)
      self->request(sup_, 20s, restart_atom_v).receive([](std::uint64_t) {}, on_error);
    else
      self->request(sup_, 20s, subscribe_atom_v, observer(self))
          .receive([](std::uint64_t) {}, on_error);
    EXPECT_EQ(err.code(), static_cast<std::uint8_t>(errc::allocator_stopped)) << req;
  }
  EXPECT_EQ(query_supervision(sys_, sup_).observers, 0u);
  c.stop();
  EXPECT_TRUE(take_events(self).empty());  // the stop was announced once, above
}

}  // namespace
}  // namespace uma
