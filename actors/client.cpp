#include <uma/actors/client.hpp>

#include <algorithm>

#include <caf/scoped_actor.hpp>

#include <uma/actors/detail/call_channel.hpp>
#include <uma/actors/detail/lane_allocation.hpp>

namespace uma {

/// Owns the ticket: only one state names it, so that the forget in its destructor is the plan's
/// end and never a copy's (a copied state forgot the ticket of a plan still awaited).
struct pending_plan::state {
  state(std::shared_ptr<detail::call_channel> c, detail::call_channel::ticket t,
        std::chrono::steady_clock::time_point d) noexcept
      : channel(std::move(c)), ticket(std::move(t)), deadline(d) {}
  state(const state&) = delete;
  state& operator=(const state&) = delete;
  /// A plan nobody waits for any more: its reply, if it comes, is dropped.
  ~state() { channel->forget(ticket); }

  std::shared_ptr<detail::call_channel> channel;
  detail::call_channel::ticket ticket;
  std::chrono::steady_clock::time_point deadline;
};

caf::message client::request(caf::message content) {
  return channel_->request(target_, std::move(content), timeout_);
}

client::client(caf::actor_system& sys, managed_allocator_actor allocator)
    : sys_(sys),
      channel_(std::make_shared<detail::call_channel>(sys)),
      allocator_(std::move(allocator)),
      owns_(false) {
  target_ = caf::actor_cast<caf::strong_actor_ptr>(allocator_);
}

client::client(caf::actor_system& sys, allocator_supervisor_actor supervisor)
    : sys_(sys),
      channel_(std::make_shared<detail::call_channel>(sys)),
      supervisor_(supervisor),
      allocator_(caf::actor_cast<managed_allocator_actor>(std::move(supervisor))),
      owns_(false) {
  target_ = caf::actor_cast<caf::strong_actor_ptr>(allocator_);
}

client::client(caf::actor_system& sys, allocator_config config)
    : sys_(sys), channel_(std::make_shared<detail::call_channel>(sys)), owns_(true) {
  config.supervision.on_stop = recording(slot_, std::move(config.supervision.on_stop));
  allocator_ = spawn_allocator(sys, std::move(config));
  target_ = caf::actor_cast<caf::strong_actor_ptr>(allocator_);
}

client::client(caf::actor_system& sys, supervisor_config config)
    : sys_(sys), channel_(std::make_shared<detail::call_channel>(sys)), owns_(true) {
  // Every incarnation records; the one that runs last (stopped by stop()) is the final report.
  config.allocator.supervision.on_stop =
      recording(slot_, std::move(config.allocator.supervision.on_stop));
  supervisor_ = spawn_supervisor(sys, std::move(config));
  allocator_ = caf::actor_cast<managed_allocator_actor>(*supervisor_);
  target_ = caf::actor_cast<caf::strong_actor_ptr>(allocator_);
}

template <class T, class Atom>
std::shared_ptr<T> client::current(per_incarnation<T>& p, Atom atom) {
  std::lock_guard lock(p.mutex);
  if (auto* now = p.now.load(std::memory_order_acquire))
    for (const auto& held : p.held)
      if (held.get() == now)
        return held;
  auto fresh = call<std::shared_ptr<T>>(atom);
  if (std::find(p.held.begin(), p.held.end(), fresh) == p.held.end())
    p.held.push_back(fresh);
  p.now.store(fresh.get(), std::memory_order_release);
  return fresh;
}

block_allocator_ref client::blocks() {
  return current(blocks_, blocks_atom_v);
}

caller_calls_ref client::calls() {
  return current(calls_, calls_atom_v);
}

bool client::after_block_refusal(const error& e, block_allocator* b) {
  if (e.code() == errc::allocator_stopped && b != nullptr) {
    blocks_.now.compare_exchange_strong(b, nullptr);
    return true;
  }
  if (detail::retried_on_lane(e))
    return false;
  throw;  // e, as it came (a fatal error reported itself where it was raised)
}

template <class R, class Served>
std::optional<R> client::on_caller(Served served) {
  if (channel_->ahead() != 0)
    return std::nullopt;
  const auto until = std::chrono::steady_clock::now() + timeout_;
  auto* c = calls_.now.load(std::memory_order_acquire);
  if (c == nullptr)
    c = calls().get();  // held from now on
  try {
    return served(*c, until);
  } catch (const error& e) {
    if (e.code() != errc::allocator_stopped || !c->ended())
      throw;  // the incarnation's own answer (an inert ref): no restart to follow
    auto* seen = c;
    calls_.now.compare_exchange_strong(seen, nullptr);
    const auto fresh = calls();  // after a restart, the new incarnation's
    if (fresh.get() == c)
      throw;
    return served(*fresh, until);
  }
}

client::~client() {
  if (owns_)
    (void)stop();
}

std::function<void(const allocator_stats&, const stop_report&)> client::recording(
    std::shared_ptr<stop_slot> slot,
    std::function<void(const allocator_stats&, const stop_report&)> next) {
  return [slot = std::move(slot), next = std::move(next)](const allocator_stats& stats,
                                                          const stop_report& report) {
    {
      std::lock_guard lock(slot->mutex);
      slot->report = final_report{stats, report};
    }
    if (next)
      next(stats, report);
  };
}

op_result client::prefetch(std::vector<byte_ref> refs, std::vector<location> locations,
                           stream_view stream, completion when) {
  prefetch_request r{std::move(refs), std::move(locations), stream, when};
  if (auto done = on_caller<op_result>(
          [&](caller_calls& c, auto until) { return c.prefetch(r, false, until); }))
    return *done;
  return call<op_result>(prefetch_atom_v, std::move(r));
}

op_result client::discard(std::vector<byte_ref> refs, stream_view stream, completion when) {
  return call<op_result>(discard_atom_v, discard_request{std::move(refs), stream, when});
}

op_result client::discard_prefetch(std::vector<byte_ref> refs, std::vector<location> locations,
                                   stream_view stream, completion when) {
  prefetch_request r{std::move(refs), std::move(locations), stream, when};
  if (auto done = on_caller<op_result>(
          [&](caller_calls& c, auto until) { return c.prefetch(r, true, until); }))
    return *done;
  return call<op_result>(discard_prefetch_atom_v, std::move(r));
}

op_result client::advise(std::vector<byte_ref> refs, advice what, location where) {
  advise_request r{std::move(refs), what, where};
  if (auto done =
          on_caller<op_result>([&](caller_calls& c, auto until) { return c.advise(r, until); }))
    return *done;
  return call<op_result>(advise_atom_v, std::move(r));
}

std::optional<byte_ref> client::allocate_here(const allocate_request& r) {
  return on_caller<byte_ref>([&](caller_calls& c, auto until) { return c.allocate(r, until); });
}

range_attributes client::attributes_of(const byte_ref& ref) {
  if (auto got = on_caller<range_attributes>(
          [&](caller_calls& c, auto until) { return c.attributes(ref, until); }))
    return *got;
  return call<range_attributes>(attributes_atom_v, ref);
}

memory_kind client::kind_of(const void* ptr) {
  return call<memory_kind>(memory_kind_atom_v, reinterpret_cast<std::uintptr_t>(ptr));
}

allocator_stats client::stats() {
  if (auto got =
          on_caller<allocator_stats>([](caller_calls& c, auto until) { return c.stats(until); }))
    return *got;
  return call<allocator_stats>(stats_atom_v);
}

allocator_stats client::flush() {
  return call<allocator_stats>(flush_atom_v);
}

residency_result client::will_access(std::vector<byte_ref> refs, int device, access_mode mode,
                                     residency_policy policy, stream_view stream, completion when) {
  return will_access(access_plan_request{std::move(refs), device, mode, policy, stream, when});
}

residency_result client::will_access(access_plan_request plan) {
  return call<residency_result>(will_access_atom_v, std::move(plan));
}

pending_plan::pending_plan(std::unique_ptr<state> s) noexcept : state_(std::move(s)) {}
pending_plan::pending_plan(pending_plan&&) noexcept = default;
pending_plan& pending_plan::operator=(pending_plan&&) noexcept = default;
pending_plan::~pending_plan() = default;

residency_result pending_plan::get() {
  if (!state_)
    raise(errc::invalid_argument, "pending_plan::get: no plan (its reply was taken already)");
  const auto s = std::move(state_);
  auto reply = s->channel->await(s->ticket, s->deadline);
  return detail::take_reply<residency_result>(reply);
}

pending_plan client::will_access_async(std::vector<byte_ref> refs, int device, access_mode mode,
                                       residency_policy policy, stream_view stream,
                                       completion when) {
  return will_access_async(
      access_plan_request{std::move(refs), device, mode, policy, stream, when});
}

pending_plan client::will_access_async(access_plan_request plan) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  // Sent ahead: until its reply has come, caller calls go as messages, behind it.
  auto t = channel_->send(target_, caf::make_message(will_access_atom_v, std::move(plan)), true);
  return pending_plan(std::make_unique<pending_plan::state>(channel_, std::move(t), deadline));
}

std::vector<region_info> client::regions() {
  return call<std::vector<region_info>>(regions_atom_v);
}

allocator_snapshot client::snapshot() {
  return call<allocator_snapshot>(snapshot_atom_v);
}

std::optional<final_report> client::stop() {
  std::lock_guard once(stop_mutex_);
  if (!allocator_)
    return report_;
  caf::scoped_actor self{sys_};
  self->send_exit(allocator_, caf::exit_reason::user_shutdown);
  // Terminated means its on_exit (post_stop, and so on_stop) has returned.
  self->wait_for(allocator_);
  allocator_ = nullptr;
  supervisor_.reset();
  if (owns_) {
    std::lock_guard lock(slot_->mutex);
    report_ = slot_->report;
  }
  return report_;
}

}  // namespace uma
