#pragma once

// The allocator supervisor's restart observers (actors/allocator_supervisor.cpp): the actors
// that asked to hear of every new incarnation, kept by weak address (a subscription must not
// keep its observer alive) and monitored through the supervisor, so that a dead one is
// forgotten. Each hears every restart_event once, and at the end once that no incarnation
// follows. No lock: the supervisor owns one and uses it only from its own handlers.

#include <cstddef>
#include <vector>

#include <caf/actor_addr.hpp>
#include <caf/fwd.hpp>

#include <uma/messages/interface.hpp>

namespace uma::detail {

class restart_observers {
 public:
  /// `self`: the supervisor, which monitors each observer while it is subscribed.
  explicit restart_observers(caf::local_actor& self) : self_(&self) {}

  /// Adds `o` (a valid handle), once however often it subscribes, and monitors it.
  void subscribe(const restart_observer_actor& o);
  /// Removes `o` and stops monitoring it; false when it was not subscribed.
  bool unsubscribe(const restart_observer_actor& o);
  /// A down message from `who`: forgotten if it was an observer (its monitor fired once).
  void forget(const caf::actor_addr& who);
  /// Tells `ev` to every observer still alive.
  void notify(const restart_event& ev) const;
  /// Tells `last` (no incarnation follows) to every observer, then forgets them all.
  void announce_last(const restart_event& last);
  /// How many are subscribed.
  [[nodiscard]] std::size_t size() const noexcept { return observers_.size(); }

 private:
  caf::local_actor* self_;
  std::vector<caf::actor_addr> observers_;
};

}  // namespace uma::detail
