// The blocking facades' request channel (actors/detail/request_channel.hpp) under concurrency: many
// threads sharing one client, a stop while calls are in flight (bare allocator and supervisor),
// timeouts whose replies come later (no slot kept, the late reply dropped), and a dead receiver.
// Bounded in calls; every wait has a deadline; no sleeps.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/detail/request_channel.hpp>
#include "support/reliability_fixture.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;
using test::reliability_fixture;

constexpr int threads = 8;

struct request_channel_race : reliability_fixture {};

/// Holds each int request until a "go" message, then answers all held ones (x + 1); "go"
/// answers with how many it released. Any other request is held for good (never answered).
/// The unused argument: CAF 0.17 dereferences a null argument tuple when a function-based actor
/// is spawned with none (a UBSan report).
caf::behavior gate_actor(caf::event_based_actor* self, int) {
  auto held = std::make_shared<std::vector<std::pair<caf::response_promise, int>>>();
  auto never = std::make_shared<std::vector<caf::response_promise>>();
  self->set_default_handler(
      [never](caf::scheduled_actor* me, caf::message_view&) -> caf::result<caf::message> {
        auto rp = static_cast<caf::event_based_actor*>(me)->make_response_promise();
        never->push_back(rp);
        return rp;
      });
  return {
      [self, held](int x) {
        auto rp = self->make_response_promise();
        held->emplace_back(rp, x);
        return rp;
      },
      [held](const std::string&) {
        const auto n = static_cast<int>(held->size());
        for (auto& [rp, x] : *held)
          rp.deliver(x + 1);
        held->clear();
        return n;
      },
  };
}

int released(caf::actor_system& sys, const caf::actor& gate) {
  caf::scoped_actor self{sys};
  int n = -1;
  self->request(gate, 10s, std::string("go")).receive([&](int k) { n = k; }, [](caf::error&) {});
  return n;
}

TEST_F(request_channel_race, many_threads_share_one_client) {
  client c(sys_, allocator_config{});
  auto shared = c.allocate<std::byte>(4096);
  const auto before = c.flush().live_regions;
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      allocate_options labelled;
      labelled.label = "race";
      for (int i = 0; i < 200; ++i) {
        auto ref = c.allocate<std::byte>(1024, labelled);  // a message: labelled
        const auto attr = c.attributes(shared);
        const auto stats = c.stats();
        if (!ref.valid() || stats.live_regions == 0 || attr.read_mostly)
          ++failures;
      }
    });
  for (auto& th : pool)
    th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(c.flush().live_regions, before);  // every labelled block released
}

/// Every thread calls until the stop ends its calls: each ends with allocator_stopped, none
/// hangs or gets another error.
void stop_while_in_flight(client& c) {
  std::atomic<int> stopped{0}, other{0}, calls{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      allocate_options labelled;
      labelled.label = "stop";
      for (;;) {
        try {
          (void)c.allocate<std::byte>(512, labelled);
          (void)c.stats();
          ++calls;
        } catch (const error& e) {
          ++(e.code() == errc::allocator_stopped ? stopped : other);
          return;
        }
      }
    });
  while (calls.load() < 100)
    std::this_thread::yield();
  const auto report = c.stop();
  for (auto& th : pool)
    th.join();
  EXPECT_TRUE(report);
  EXPECT_EQ(stopped.load(), threads);
  EXPECT_EQ(other.load(), 0);
}

TEST_F(request_channel_race, stop_while_calls_are_in_flight) {
  client c(sys_, allocator_config{});
  stop_while_in_flight(c);
}

TEST_F(request_channel_race, stop_while_calls_are_in_flight_through_a_supervisor) {
  client c(sys_, supervisor_config{});
  stop_while_in_flight(c);
}

TEST_F(request_channel_race, a_timed_out_call_keeps_no_slot_and_drops_its_late_reply) {
  detail::request_channel channel(sys_);
  const auto gate = sys_.spawn(gate_actor, 0);
  const auto dest = caf::actor_cast<caf::strong_actor_ptr>(gate);
  std::atomic<int> timeouts{0}, answers{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        auto reply = channel.request(dest, caf::make_message(i), 2ms);
        caf::error err;
        if (auto v = detail::reply_value<int>(reply, err))
          ++answers;
        else if (err == caf::sec::request_timeout)
          ++timeouts;
      }
    });
  for (auto& th : pool)
    th.join();
  EXPECT_EQ(timeouts.load(), threads * 20);  // the gate answers nothing until "go"
  EXPECT_EQ(answers.load(), 0);
  EXPECT_EQ(channel.in_flight(), 0u);             // every timed-out call took its slot back
  EXPECT_EQ(released(sys_, gate), threads * 20);  // the late replies: dropped by the sink
  EXPECT_EQ(channel.in_flight(), 0u);
  // The channel still works: a call answered before its deadline.
  const auto t = channel.send(dest, caf::make_message(41));
  EXPECT_EQ(released(sys_, gate), 1);
  auto reply = channel.await(t, std::chrono::steady_clock::now() + 10s);
  EXPECT_EQ(detail::take_reply<int>(reply), 42);
  caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
}

TEST_F(request_channel_race, a_forgotten_call_keeps_no_slot) {
  detail::request_channel channel(sys_);
  const auto gate = sys_.spawn(gate_actor, 0);
  const auto t = channel.send(caf::actor_cast<caf::strong_actor_ptr>(gate), caf::make_message(1));
  EXPECT_EQ(channel.in_flight(), 1u);
  channel.forget(t);
  EXPECT_EQ(channel.in_flight(), 0u);
  EXPECT_EQ(released(sys_, gate), 1);
  EXPECT_FALSE(t.slot->ready());  // the reply was dropped, not delivered
  caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
}

TEST_F(request_channel_race, a_dead_receiver_answers_allocator_stopped) {
  client c(sys_, allocator_config{});
  const auto handle = c.handle();
  (void)c.stop();
  client other(sys_, handle);  // a client of the stopped allocator, by handle
  try {
    (void)other.stats();
    FAIL() << "stats of a stopped allocator returned";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::allocator_stopped);
  }
}

TEST_F(request_channel_race, a_client_timeout_is_a_timeout) {
  client c(sys_, allocator_config{});
  const auto gate = sys_.spawn(gate_actor, 0);
  // A client whose "allocator" never answers in time: the gate holds every request.
  client slow(sys_, caf::actor_cast<managed_allocator_actor>(gate));
  slow.set_timeout(5ms);
  UMA_EXPECT_ERRC((void)slow.stats(), errc::timeout);
  caf::anon_send_exit(gate, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace uma
