// detail::restart_observers: the allocator supervisor's subscribers to restart events, kept by
// weak address and monitored through the supervisor (here a scoped actor stands in for it).

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <vector>

#include <caf/after.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/detail/restart_observers.hpp>
#include "support/actor_fixture.hpp"

namespace uma::detail {
namespace {

using namespace std::chrono_literals;

class restart_observers_test : public test::actor_fixture {
 protected:
  static restart_observer_actor handle(caf::scoped_actor& a) {
    return caf::actor_cast<restart_observer_actor>(a);
  }
  /// The generations of the restart events already in `a`'s mailbox (sent synchronously).
  static std::vector<std::uint64_t> events(caf::scoped_actor& a) {
    std::vector<std::uint64_t> out;
    for (bool more = true; more;)
      a->receive([&](restarted_atom, restart_event& e) { out.push_back(e.generation_before); },
                 caf::after(0s) >> [&] { more = false; });
    return out;
  }
  /// Whose down message is in the supervisor's mailbox, if any.
  static std::optional<caf::actor_addr> down(caf::scoped_actor& a) {
    std::optional<caf::actor_addr> out;
    a->receive([&](caf::down_msg& dm) { out = dm.source; }, caf::after(0s) >> [] {});
    return out;
  }
  static restart_event event(std::uint64_t before) {
    return restart_event{before, before + 1, restart_cause::requested, {}};
  }
};

TEST_F(restart_observers_test, EachObserverHearsEachEventOnceAndTheLastOneBeforeItIsForgotten) {
  caf::scoped_actor sup{sys_}, a{sys_}, b{sys_};
  restart_observers observers{*sup};
  observers.subscribe(handle(a));
  observers.subscribe(handle(a));  // once however often it subscribes
  observers.subscribe(handle(b));
  EXPECT_EQ(observers.size(), 2u);
  observers.notify(event(1));
  observers.notify(event(2));
  EXPECT_EQ(events(a), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(events(b), (std::vector<std::uint64_t>{1, 2}));
  observers.announce_last(event(3));
  EXPECT_EQ(observers.size(), 0u);
  EXPECT_EQ(events(a), std::vector<std::uint64_t>{3});
  observers.notify(event(4));
  EXPECT_TRUE(events(a).empty()) << "forgotten after the last event";
}

TEST_F(restart_observers_test, AnUnsubscribedObserverIsNoLongerToldNorMonitored) {
  caf::scoped_actor sup{sys_};
  restart_observers observers{*sup};
  {
    caf::scoped_actor a{sys_};
    observers.subscribe(handle(a));
    EXPECT_TRUE(observers.unsubscribe(handle(a)));
    EXPECT_FALSE(observers.unsubscribe(handle(a)));
    observers.notify(event(1));
    EXPECT_TRUE(events(a).empty());
  }
  EXPECT_FALSE(down(sup)) << "its end is not the supervisor's business any more";
  EXPECT_EQ(observers.size(), 0u);
}

TEST_F(restart_observers_test, ADeadObserverIsReportedThroughTheMonitorAndForgotten) {
  caf::scoped_actor sup{sys_}, stays{sys_};
  restart_observers observers{*sup};
  observers.subscribe(handle(stays));
  caf::actor_addr gone;
  {
    caf::scoped_actor a{sys_};
    gone = a->address();
    observers.subscribe(handle(a));
  }
  const auto who = down(sup);
  ASSERT_TRUE(who) << "the supervisor monitors its observers";
  EXPECT_EQ(*who, gone);
  observers.forget(*who);
  EXPECT_EQ(observers.size(), 1u);
  observers.notify(event(1));
  EXPECT_EQ(events(stays), std::vector<std::uint64_t>{1});
}

}  // namespace
}  // namespace uma::detail
