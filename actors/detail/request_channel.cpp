#include <uma/actors/detail/request_channel.hpp>

#include <caf/actor_cast.hpp>
#include <caf/actor_companion.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/sec.hpp>

#include <uma/actors/detail/inline_unit.hpp>

namespace uma::detail {

std::shared_ptr<reply_slot> request_channel::table::take(std::uint64_t id, bool by_sink) {
  std::lock_guard lock(mutex);
  auto it = slots.find(id);
  if (it == slots.end() || (it->second.ahead && !by_sink))
    return nullptr;
  auto slot = std::move(it->second.slot);
  if (it->second.ahead)
    ahead.fetch_sub(1, std::memory_order_acq_rel);
  slots.erase(it);
  if (by_sink)
    slot->claim();
  return slot;
}

request_channel::request_channel(caf::actor_system& sys) : unit_(inline_unit::of(sys)) {
  auto sink = sys.spawn<caf::actor_companion, caf::hidden>();
  auto* companion = static_cast<caf::actor_companion*>(caf::actor_cast<caf::abstract_actor*>(sink));
  // Runs on the replying thread (an actor's, a lane's, or this caller's own through the inline
  // unit): only responses to this channel's requests are expected; anything else is dropped.
  companion->on_enqueue([t = table_](caf::mailbox_element_ptr element) {
    if (!element || !element->mid.is_response())
      return;
    if (auto slot = t->take(element->mid.request_id().integer_value(), true))
      slot->fill(element->move_content_to_message());
  });
  sink_ = caf::actor_cast<caf::strong_actor_ptr>(std::move(sink));
}

request_channel::~request_channel() {
  auto* companion =
      static_cast<caf::actor_companion*>(caf::actor_cast<caf::abstract_actor*>(sink_));
  // Late replies are dropped from now on; the sink goes away with its last reference (a reply
  // still on the way names it as its receiver). Debian's libcaf_core lacks `disconnect`.
  companion->on_enqueue({});
}

request_channel::ticket request_channel::send(const caf::strong_actor_ptr& dest,
                                              caf::message content, bool ahead) {
  const auto mid = caf::make_message_id(++next_id_);
  ticket t{mid.request_id().integer_value(), std::make_shared<reply_slot>()};
  {
    std::lock_guard lock(table_->mutex);
    const bool counted = ahead && dest != nullptr;  // a missing actor answers at once below
    table_->slots.emplace(t.id, table::entry{t.slot, counted});
    if (counted)
      table_->ahead.fetch_add(1, std::memory_order_acq_rel);
  }
  if (!dest) {  // no actor (a stopped client's): answered as a dead one would be
    t.slot->fill(caf::make_message(caf::make_error(caf::sec::request_receiver_down)));
    forget(t);
    return t;
  }
  auto element = caf::make_mailbox_element(sink_, mid, {}, std::move(content));
  const auto slot = t.slot;
  unit_.send(dest, std::move(element), [&slot] { return slot->ready(); });
  return t;
}

caf::message request_channel::await(const ticket& t,
                                    std::chrono::steady_clock::time_point deadline) {
  if (t.slot->wait_until(deadline))
    return std::move(t.slot->reply());
  if (!table_->take(t.id, false) && t.slot->claimed()) {
    // The sink took the slot first: its fill is under way and ends at once.
    (void)t.slot->wait_until(std::chrono::steady_clock::now() + std::chrono::hours(1));
    return std::move(t.slot->reply());
  }
  return caf::make_message(caf::make_error(caf::sec::request_timeout));
}

void request_channel::forget(const ticket& t) {
  (void)table_->take(t.id, false);
}

std::size_t request_channel::in_flight() const {
  std::lock_guard lock(table_->mutex);
  return table_->slots.size();
}

}  // namespace uma::detail
