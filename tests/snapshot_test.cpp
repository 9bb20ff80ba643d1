// Snapshots and the event history (memory/event_history.hpp, `snapshot_atom`,
// client::snapshot): what a snapshot holds, the bounded ring, the history across restarts, and
// a stopped allocator.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include "support/actor_fixture.hpp"
#include "tools/snapshot_json.hpp"
#include "tools/snapshot_page.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;

class snapshot_test : public test::actor_fixture {};

std::vector<event_kind> kinds_of(const allocator_snapshot& s) {
  std::vector<event_kind> out;
  for (const auto& e : s.events)
    out.push_back(e.kind);
  return out;
}

TEST_F(snapshot_test, HoldsEveryLiveRegionWithPolicyAdviceAndLastPrefetch) {
  auto w = uma_->allocate<float>(1024, {.label = "weights"});
  auto a = uma_->allocate<float>(256, {.attach = attach_flag::host, .label = "activations"});
  static_cast<void>(uma_->prefetch(w, location::host()));
  static_cast<void>(uma_->advise(w, advice::set_read_mostly));
  const auto s = uma_->snapshot();
  EXPECT_EQ(s.generation, 1u);
  EXPECT_EQ(s.backend, "host");
  EXPECT_EQ(s.stats.live_regions, 2u);
  ASSERT_EQ(s.regions.size(), 2u);
  EXPECT_EQ(s.regions[0].info.label, "weights");
  EXPECT_EQ(s.regions[0].info.bytes, 4096u);
  EXPECT_EQ(s.regions[0].policy, region_policy::direct);
  EXPECT_EQ(s.regions[0].advice, "read_mostly");
  ASSERT_TRUE(s.regions[0].last_prefetch);
  EXPECT_EQ(*s.regions[0].last_prefetch, location::host());
  EXPECT_EQ(s.regions[1].info.label, "activations");
  EXPECT_EQ(s.regions[1].info.attach, attach_flag::host);
  EXPECT_EQ(s.regions[1].advice, "none");
  EXPECT_FALSE(s.regions[1].last_prefetch);
  EXPECT_GT(s.taken_at_ns, 0);
}

TEST_F(snapshot_test, RecordsEventsInOrderWithKindsLabelsAndTimes) {
  {
    auto w = uma_->allocate<float>(1024, {.label = "weights"});
    static_cast<void>(uma_->prefetch(w, location::host()));
    static_cast<void>(uma_->advise(w, advice::set_read_mostly));
    static_cast<void>(uma_->discard({client::erase(w)}));
  }
  static_cast<void>(uma_->flush());
  const auto s = uma_->snapshot();
  EXPECT_EQ(kinds_of(s),
            (std::vector<event_kind>{event_kind::allocate, event_kind::prefetch, event_kind::advise,
                                     event_kind::discard, event_kind::release}));
  for (std::size_t i = 0; i < s.events.size(); ++i) {
    EXPECT_EQ(s.events[i].label, "weights");
    EXPECT_EQ(s.events[i].bytes, 4096u);
    EXPECT_EQ(s.events[i].region, s.events[0].region);
    if (i > 0) {
      EXPECT_GE(s.events[i].time_ns, s.events[i - 1].time_ns);
    }
  }
  EXPECT_EQ(s.events[1].detail, "to host");
  EXPECT_EQ(s.events[2].detail, "set_read_mostly host");
  EXPECT_TRUE(s.regions.empty());
}

TEST_F(snapshot_test, ABoundedRingDropsTheOldestEvents) {
  auto c = make_client(allocator_config{.supervision = {.event_history = 3}});
  for (int i = 0; i < 5; ++i)
    static_cast<void>(
        c->allocate<std::byte>(64, {.label = std::string("r").append(std::to_string(i))}));
  static_cast<void>(c->flush());
  const auto s = c->snapshot();
  // 5 allocations and 5 releases: the last three events remain.
  ASSERT_EQ(s.events.size(), 3u);
  EXPECT_EQ(s.events_dropped, 7u);
  EXPECT_EQ(s.event_capacity, 3u);
  EXPECT_EQ(s.events[0].label, "r3");
  EXPECT_EQ(s.events[0].kind, event_kind::release);
  EXPECT_EQ(s.events[1].label, "r4");
  EXPECT_EQ(s.events[1].kind, event_kind::allocate);
  EXPECT_EQ(s.events[2].kind, event_kind::release);
}

TEST(event_history_threads, ThreadsRecordingAtOnceKeepTheNewestEventsEachThreadsInItsOrder) {
  // Eight threads record at once (labelled blocks do, from every thread that hands one out)
  // while a reader takes the events: each snapshot holds each thread's events in the order it
  // recorded them, and at the end the ring holds exactly the newest `capacity` events: of each
  // thread, the last ones it recorded, none missing.
  constexpr int threads = 8;
  constexpr std::uint64_t per_thread = 1000;
  constexpr std::size_t capacity = 4096;
  event_history h(capacity);
  std::atomic<int> done{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < threads; ++t)
    writers.emplace_back([&, t] {
      for (std::uint64_t i = 0; i < per_thread; ++i)
        h.record(event_kind::allocate, static_cast<std::uint64_t>(t), i, 64, "w");
      done.fetch_add(1);
    });
  const auto in_order = [](const std::vector<allocator_event>& events) {
    std::vector<std::int64_t> last(threads, -1);
    for (const auto& e : events) {
      auto& l = last[static_cast<std::size_t>(e.generation)];
      if (static_cast<std::int64_t>(e.region) <= l)
        return false;
      l = static_cast<std::int64_t>(e.region);
    }
    return true;
  };
  bool read_well = true;  // checked after the joins: an ASSERT here would leave them joinable
  do {
    const auto events = h.events();
    read_well = read_well && events.size() <= capacity && in_order(events);
  } while (done.load() != threads);
  for (auto& w : writers)
    w.join();
  EXPECT_TRUE(read_well) << "a snapshot too large, or a thread's events out of its order";
  const auto events = h.events();
  ASSERT_EQ(events.size(), capacity);
  EXPECT_EQ(h.dropped(), threads * per_thread - capacity);
  EXPECT_TRUE(in_order(events));
  std::vector<std::uint64_t> held(threads, 0), first(threads, per_thread);
  for (const auto& e : events) {
    ++held[static_cast<std::size_t>(e.generation)];
    first[static_cast<std::size_t>(e.generation)] =
        std::min(first[static_cast<std::size_t>(e.generation)], e.region);
  }
  for (int t = 0; t < threads; ++t)  // a suffix of each thread's events, none missing
    EXPECT_EQ(first[static_cast<std::size_t>(t)] + held[static_cast<std::size_t>(t)], per_thread)
        << "thread " << t;
}

TEST_F(snapshot_test, CapacityZeroRecordsNothing) {
  auto c = make_client(allocator_config{.supervision = {.event_history = 0}});
  auto r = c->allocate<float>(16, {.label = "kept"});
  const auto s = c->snapshot();
  EXPECT_TRUE(s.events.empty());
  EXPECT_EQ(s.events_dropped, 0u);
  EXPECT_EQ(s.event_capacity, 0u);
  ASSERT_EQ(s.regions.size(), 1u);  // the regions are reported all the same
}

TEST_F(snapshot_test, ASupervisorsHistorySpansRestarts) {
  supervisor_config cfg;
  cfg.allocator.backend.instance = backend_;
  cfg.backoff_initial = 0ms;
  client c(sys_, cfg);
  static_cast<void>(c.allocate<float>(16, {.label = "before"}));
  caf::scoped_actor self{sys_};
  std::uint64_t gen = 0;
  self->request(*c.supervisor(), 20s, restart_atom_v)
      .receive([&](std::uint64_t g) { gen = g; },
               [&](caf::error& e) { ADD_FAILURE() << sys_.render(e); });
  ASSERT_EQ(gen, 2u);
  const auto s = c.snapshot();
  EXPECT_EQ(s.generation, 2u);
  const auto k = kinds_of(s);
  ASSERT_GE(k.size(), 4u);
  EXPECT_EQ(k[0], event_kind::allocate);
  EXPECT_EQ(k[k.size() - 2], event_kind::stop);
  EXPECT_EQ(s.events[k.size() - 2].generation, 1u);
  EXPECT_EQ(k.back(), event_kind::restart);
  EXPECT_EQ(s.events.back().generation, 2u);
}

TEST_F(snapshot_test, AStoppedAllocatorSaysSo) {
  auto c = make_client(host_config());
  auto handle = c->handle();
  static_cast<void>(c->stop());
  client other(sys_, handle);
  try {
    static_cast<void>(other.snapshot());
    FAIL() << "a stopped allocator answered a snapshot";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::allocator_stopped);
  }
}

TEST_F(snapshot_test, JsonAndPageEscapeLabels) {
  auto r = uma_->allocate<float>(16, {.label = "</script><b>&"});
  const auto s = uma_->snapshot();
  const auto json = cli::to_json(s);
  EXPECT_NE(json.find("\"policy\": \"direct\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"kind\": \"allocate\""), std::string::npos) << json;
  const auto page = cli::snapshot_page(s);
  EXPECT_EQ(page.find("</script><b>"), std::string::npos);
  EXPECT_NE(page.find("\\u003c/script\\u003e\\u003cb\\u003e\\u0026"), std::string::npos);
}

TEST_F(snapshot_test, JsonCarriesARegionsResidencyAndNullWithoutOne) {
  auto c = host_config();
  c.backend.instance = std::make_shared<host_backend>(emulated_devices{1, std::uint64_t{64} << 20});
  auto uma = make_client(c);
  auto planned = client::erase(uma->allocate<std::byte>(4096, {.label = "planned"}));
  auto other = uma->allocate<std::byte>(4096, {.label = "other"});
  static_cast<void>(uma->will_access({planned}, 0, access_mode::write, residency_policy::migrate));
  const auto json = cli::to_json(uma->snapshot());
  EXPECT_NE(json.find("\"residency\": null"), std::string::npos) << json;  // "other"
  EXPECT_NE(json.find("\"policy\": \"migrate\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"device\": 0"), std::string::npos) << json;
  EXPECT_NE(json.find("\"to_device_bytes\": 4096"), std::string::npos) << json;
  EXPECT_NE(json.find("\"prefetched_to_device_bytes\": 0"), std::string::npos) << json;
}

}  // namespace
}  // namespace uma
