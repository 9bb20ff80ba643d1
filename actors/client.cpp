#include <uma/actors/client.hpp>

#include <algorithm>
#include <functional>
#include <mutex>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/detail/lane_allocation.hpp>
#include <uma/actors/detail/request_channel.hpp>
#include <uma/actors/managed_allocator.hpp>
#include <uma/actors/reply_value.hpp>
#include <uma/messages/interface.hpp>

namespace uma {

namespace {

using on_stop_fn = std::function<void(const allocator_stats&, const stop_report&)>;

/// Written by the spawned allocator's post_stop (its thread), read by stop().
struct stop_slot {
  std::mutex mutex;
  std::optional<final_report> report;
};

/// `next` wrapped so that it also fills `slot`.
on_stop_fn recording(std::shared_ptr<stop_slot> slot, on_stop_fn next) {
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

/// What a client was handed of each incarnation it met (restarts are few): all of them are
/// kept, so that the client's `now` pointer, read without a lock, never dangles.
template <class T>
struct held_incarnations {
  std::mutex mutex;
  std::vector<std::shared_ptr<T>> held;
};

}  // namespace

struct client::state {
  explicit state(caf::actor_system& s)
      : sys(s), channel(std::make_shared<detail::request_channel>(s)) {}

  caf::actor_system& sys;
  /// Shared with pending plans, which may outlive the client.
  std::shared_ptr<detail::request_channel> channel;
  std::shared_ptr<stop_slot> slot = std::make_shared<stop_slot>();
  std::optional<allocator_supervisor_actor> supervisor;
  managed_allocator_actor allocator;  ///< null after stop(); what handle() shows
  /// Where calls go: set by the constructor and never written again, because calls on other
  /// threads read it while stop() may run (after it, requests to the stopped actor bounce and
  /// report allocator_stopped).
  caf::strong_actor_ptr target;
  std::mutex stop_mutex;  ///< one stop() at a time
  bool owns = false;
  std::optional<final_report> report;
  held_incarnations<block_allocator> blocks;
  held_incarnations<caller_calls> calls;
};

/// Owns the ticket: only one state names it, so that the forget in its destructor is the plan's
/// end and never a copy's (a copied state forgot the ticket of a plan still awaited).
struct pending_plan::state {
  state(std::shared_ptr<detail::request_channel> c, detail::request_channel::ticket t,
        std::chrono::steady_clock::time_point d) noexcept
      : channel(std::move(c)), ticket(std::move(t)), deadline(d) {}
  state(const state&) = delete;
  state& operator=(const state&) = delete;
  /// A plan nobody waits for any more: its reply, if it comes, is dropped.
  ~state() { channel->forget(ticket); }

  std::shared_ptr<detail::request_channel> channel;
  detail::request_channel::ticket ticket;
  std::chrono::steady_clock::time_point deadline;
};

template <class R, class... Ts>
R client::send_request(Ts&&... xs) {
  auto reply = state_->channel->request(state_->target, caf::make_message(std::forward<Ts>(xs)...),
                                        timeout_);
  return detail::take_reply<R>(reply);
}

client::client(caf::actor_system& sys, managed_allocator_actor allocator)
    : state_(std::make_unique<state>(sys)) {
  state_->allocator = std::move(allocator);
  state_->target = caf::actor_cast<caf::strong_actor_ptr>(state_->allocator);
}

client::client(caf::actor_system& sys, allocator_supervisor_actor supervisor)
    : state_(std::make_unique<state>(sys)) {
  state_->supervisor = supervisor;
  state_->allocator = caf::actor_cast<managed_allocator_actor>(std::move(supervisor));
  state_->target = caf::actor_cast<caf::strong_actor_ptr>(state_->allocator);
}

client::client(caf::actor_system& sys) : client(sys, allocator_config{}) {}

client::client(caf::actor_system& sys, allocator_config config)
    : state_(std::make_unique<state>(sys)) {
  state_->owns = true;
  config.supervision.on_stop = recording(state_->slot, std::move(config.supervision.on_stop));
  state_->allocator = spawn_allocator(sys, std::move(config));
  state_->target = caf::actor_cast<caf::strong_actor_ptr>(state_->allocator);
}

client::client(caf::actor_system& sys, supervisor_config config)
    : state_(std::make_unique<state>(sys)) {
  state_->owns = true;
  // Every incarnation records; the one that runs last (stopped by stop()) is the final report.
  config.allocator.supervision.on_stop =
      recording(state_->slot, std::move(config.allocator.supervision.on_stop));
  state_->supervisor = spawn_supervisor(sys, std::move(config));
  state_->allocator = caf::actor_cast<managed_allocator_actor>(*state_->supervisor);
  state_->target = caf::actor_cast<caf::strong_actor_ptr>(state_->allocator);
}

client::~client() {
  if (state_->owns)
    (void)stop();
}

const managed_allocator_actor& client::handle() const noexcept {
  return state_->allocator;
}

const std::optional<allocator_supervisor_actor>& client::supervisor() const noexcept {
  return state_->supervisor;
}

template <class T, class Held, class Atom>
std::shared_ptr<T> client::current(std::atomic<T*>& now, Held& held, Atom atom) {
  std::lock_guard lock(held.mutex);
  if (auto* p = now.load(std::memory_order_acquire))
    for (const auto& h : held.held)
      if (h.get() == p)
        return h;
  auto fresh = send_request<std::shared_ptr<T>>(atom);
  if (std::find(held.held.begin(), held.held.end(), fresh) == held.held.end())
    held.held.push_back(fresh);
  now.store(fresh.get(), std::memory_order_release);
  return fresh;
}

block_allocator_ref client::blocks() {
  return current(blocks_now_, state_->blocks, blocks_atom_v);
}

caller_calls_ref client::calls() {
  return current(calls_now_, state_->calls, calls_atom_v);
}

bool client::after_block_refusal(const error& e, block_allocator* b) {
  if (e.code() == errc::allocator_stopped && b != nullptr) {
    blocks_now_.compare_exchange_strong(b, nullptr);
    return true;
  }
  if (detail::retried_on_lane(e))
    return false;
  throw;  // e, as it came (a fatal error reported itself where it was raised)
}

template <class R, class Served>
std::optional<R> client::on_caller(Served served) {
  if (state_->channel->ahead() != 0)
    return std::nullopt;
  const auto until = std::chrono::steady_clock::now() + timeout_;
  auto* c = calls_now_.load(std::memory_order_acquire);
  if (c == nullptr)
    c = calls().get();  // held from now on
  try {
    return served(*c, until);
  } catch (const error& e) {
    if (e.code() != errc::allocator_stopped || !c->ended())
      throw;  // the incarnation's own answer (an inert ref): no restart to follow
    auto* seen = c;
    calls_now_.compare_exchange_strong(seen, nullptr);
    const auto fresh = calls();  // after a restart, the new incarnation's
    if (fresh.get() == c)
      throw;
    return served(*fresh, until);
  }
}

op_result client::prefetch(std::vector<byte_ref> refs, std::vector<location> locations,
                           stream_view stream, completion when) {
  prefetch_request r{std::move(refs), std::move(locations), stream, when};
  if (auto done = on_caller<op_result>(
          [&](caller_calls& c, auto until) { return c.prefetch(r, false, until); }))
    return *done;
  return send_request<op_result>(prefetch_atom_v, std::move(r));
}

op_result client::discard(std::vector<byte_ref> refs, stream_view stream, completion when) {
  return send_request<op_result>(discard_atom_v, discard_request{std::move(refs), stream, when});
}

op_result client::discard_prefetch(std::vector<byte_ref> refs, std::vector<location> locations,
                                   stream_view stream, completion when) {
  prefetch_request r{std::move(refs), std::move(locations), stream, when};
  if (auto done = on_caller<op_result>(
          [&](caller_calls& c, auto until) { return c.prefetch(r, true, until); }))
    return *done;
  return send_request<op_result>(discard_prefetch_atom_v, std::move(r));
}

op_result client::advise(std::vector<byte_ref> refs, advice what, location where) {
  advise_request r{std::move(refs), what, where};
  if (auto done =
          on_caller<op_result>([&](caller_calls& c, auto until) { return c.advise(r, until); }))
    return *done;
  return send_request<op_result>(advise_atom_v, std::move(r));
}

std::optional<byte_ref> client::allocate_here(const allocate_request& r) {
  return on_caller<byte_ref>([&](caller_calls& c, auto until) { return c.allocate(r, until); });
}

range_attributes client::attributes_of(const byte_ref& ref) {
  if (auto got = on_caller<range_attributes>(
          [&](caller_calls& c, auto until) { return c.attributes(ref, until); }))
    return *got;
  return send_request<range_attributes>(attributes_atom_v, ref);
}

memory_kind client::kind_of(const void* ptr) {
  return send_request<memory_kind>(memory_kind_atom_v, reinterpret_cast<std::uintptr_t>(ptr));
}

allocator_stats client::stats() {
  if (auto got =
          on_caller<allocator_stats>([](caller_calls& c, auto until) { return c.stats(until); }))
    return *got;
  return send_request<allocator_stats>(stats_atom_v);
}

allocator_stats client::flush() {
  return send_request<allocator_stats>(flush_atom_v);
}

residency_result client::will_access(std::vector<byte_ref> refs, int device, access_mode mode,
                                     residency_policy policy, stream_view stream, completion when) {
  return will_access(access_plan_request{std::move(refs), device, mode, policy, stream, when});
}

residency_result client::will_access(access_plan_request plan) {
  return send_request<residency_result>(will_access_atom_v, std::move(plan));
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
  auto t = state_->channel->send(state_->target,
                                 caf::make_message(will_access_atom_v, std::move(plan)), true);
  return pending_plan(
      std::make_unique<pending_plan::state>(state_->channel, std::move(t), deadline));
}

std::vector<region_info> client::regions() {
  return send_request<std::vector<region_info>>(regions_atom_v);
}

allocator_snapshot client::snapshot() {
  return send_request<allocator_snapshot>(snapshot_atom_v);
}

std::optional<final_report> client::stop() {
  auto& s = *state_;
  std::lock_guard once(s.stop_mutex);
  if (!s.allocator)
    return s.report;
  caf::scoped_actor self{s.sys};
  self->send_exit(s.allocator, caf::exit_reason::user_shutdown);
  // Terminated means its on_exit (post_stop, and so on_stop) has returned.
  self->wait_for(s.allocator);
  s.allocator = nullptr;
  s.supervisor.reset();
  if (s.owns) {
    std::lock_guard lock(s.slot->mutex);
    s.report = s.slot->report;
  }
  return s.report;
}

byte_ref client::allocate_by_message(allocate_request r) {
  return send_request<byte_ref>(allocate_atom_v, std::move(r));
}

bool client::can_access_of(location loc, const byte_ref& ref) {
  return send_request<bool>(can_access_atom_v, loc, ref);
}

std::uint64_t client::trim() {
  return send_request<std::uint64_t>(trim_atom_v);
}

std::uint64_t client::quota(std::uint64_t set_bytes) {
  return send_request<std::uint64_t>(quota_atom_v, set_bytes);
}

std::uint64_t client::done_with(std::vector<byte_ref> refs) {
  return send_request<std::uint64_t>(done_with_atom_v, std::move(refs));
}

residency_result client::dead(std::vector<byte_ref> refs) {
  return send_request<residency_result>(dead_atom_v, std::move(refs));
}

std::uint64_t client::done_with(std::vector<address_range> ranges) {
  return send_request<std::uint64_t>(done_ranges_atom_v, std::move(ranges));
}

residency_result client::dead(std::vector<address_range> ranges) {
  return send_request<residency_result>(dead_ranges_atom_v, std::move(ranges));
}

std::uint64_t client::device_budget(int device, std::uint64_t set_bytes) {
  return send_request<std::uint64_t>(budget_atom_v, device, set_bytes);
}

std::uint64_t client::tenant_budget(std::string tenant, int device, std::uint64_t bytes) {
  return send_request<std::uint64_t>(tenant_budget_atom_v, std::move(tenant), device, bytes);
}

residency_report client::residency() {
  return send_request<residency_report>(residency_atom_v);
}

}  // namespace uma
