#include <uma/actors/detail/restart_observers.hpp>

#include <algorithm>
#include <utility>

#include <caf/local_actor.hpp>
#include <caf/send.hpp>

namespace uma::detail {

void restart_observers::subscribe(const restart_observer_actor& o) {
  if (std::find(observers_.begin(), observers_.end(), o.address()) != observers_.end())
    return;
  observers_.push_back(o.address());
  self_->monitor(o);
}

bool restart_observers::unsubscribe(const restart_observer_actor& o) {
  const auto it = std::find(observers_.begin(), observers_.end(), o.address());
  if (it == observers_.end())
    return false;
  observers_.erase(it);
  self_->demonitor(o.address());
  return true;
}

void restart_observers::forget(const caf::actor_addr& who) {
  observers_.erase(std::remove(observers_.begin(), observers_.end(), who), observers_.end());
}

void restart_observers::notify(const restart_event& ev) const {
  for (const auto& addr : observers_)
    if (auto o = caf::actor_cast<restart_observer_actor>(addr))
      caf::anon_send(o, restarted_atom_v, ev);
}

void restart_observers::announce_last(const restart_event& last) {
  notify(last);
  for (const auto& addr : std::exchange(observers_, {}))
    self_->demonitor(addr);
}

}  // namespace uma::detail
