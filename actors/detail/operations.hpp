#pragma once

// One operation per request (docs/design.md "The incarnation"): checked and noted under the
// incarnation's guard, a backend call for an executor to run with no lock held (the caller's
// thread: incarnation.cpp; the actor's lanes: managed_allocator.cpp), counted under the guard
// again. Both executors run these functions; no request's checks or counting is written twice.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include <uma/actors/detail/incarnation_state.hpp>
#include <uma/actors/detail/request_checks.hpp>
#include <uma/memory/advice_ops.hpp>

namespace uma::detail {

/// Where an operation's backend call goes on the actor's lanes, and when its reply is due.
struct step_route {
  std::size_t lane = worker_lanes::general;
  stream_view stream{};
  completion when = completion::enqueued;
  bool stream_ordered = false;  ///< a stream's operations go out in request order
};

/// Nothing to count after the call: a caller's executor takes no guard again.
struct nothing_to_count {
  template <class Reply>
  void operator()(incarnation_state&, Reply&) const noexcept {}
};

/// Nothing a failed call leaves untrue.
struct nothing_to_undo {
  void operator()(incarnation_state&) const noexcept {}
};

/// One request's backend call, decided under the guard. No `call`: nothing for the runtime,
/// `summary` is the reply once `end` ran.
template <class Reply, class Call, class End, class Undo>
struct backend_step {
  Reply summary;
  std::optional<Call> call;  ///< Reply(backend&), run with no lock held
  End end;                   ///< void(incarnation_state&, Reply&): the counters, under the guard
  Undo undo;                 ///< void(incarnation_state&): after a failed call, under the guard
  step_route route;
};

template <class Reply, class Call, class End = nothing_to_count, class Undo = nothing_to_undo>
[[nodiscard]] backend_step<Reply, Call, End, Undo> make_step(Reply summary, bool has_call,
                                                             Call call, step_route route = {},
                                                             End end = {}, Undo undo = {}) {
  return {std::move(summary), has_call ? std::optional<Call>(std::move(call)) : std::nullopt,
          std::move(end), std::move(undo), route};
}

/// `prefetch`, or `discard_prefetch` when `discard_first`.
[[nodiscard]] inline auto prefetch_step(incarnation_state& s, const prefetch_request& r,
                                        bool discard_first) {
  auto w = s.core.prefetch_work_for(r, discard_first);
  const step_route route{worker_lanes::for_destinations(w.merged.locations), r.stream, r.reply_when,
                         true};
  return make_step(
      w.summary, true,
      [m = std::move(w.merged), stream = r.stream, discard_first, summary = w.summary](backend& b) {
        if (discard_first)
          b.discard_prefetch(m.ranges, m.locations, stream);
        else
          b.prefetch(m.ranges, m.locations, stream);
        return summary;
      },
      route,
      [discard_first](incarnation_state& st, op_result& res) {
        st.core.count_prefetch(res, discard_first);
      });
}

/// `discard`.
[[nodiscard]] inline auto discard_step(incarnation_state& s, const discard_request& r) {
  (void)s.core.check_refs(r.refs, "discard");
  check_stream(*s.runtime, r.stream, "discard");
  s.core.note(event_kind::discard, r.refs);
  auto merged = s.core.coalesced(r.refs, {});
  auto summary = summarize(ranges_of(r.refs), r.reply_when);
  summary.backend_ranges = merged.ranges.size();
  return make_step(
      summary, true,
      [ranges = std::move(merged.ranges), stream = r.stream, summary](backend& b) {
        b.discard(ranges, stream);
        return summary;
      },
      {worker_lanes::general, r.stream, r.reply_when, true},
      [](incarnation_state& st, op_result& res) { st.core.count_discard(res); });
}

/// `advise`: advice the allocator knows to change nothing makes no call.
[[nodiscard]] inline auto advise_step(incarnation_state& s, const advise_request& r) {
  auto w = s.core.checked_advice(r);
  const bool has_call = !w.todo.empty();
  return make_step(
      w.summary, has_call,
      [todo = std::move(w.todo), what = r.what, where = r.where, summary = w.summary](backend& b) {
        apply_advice_whole(b, todo, what, where);
        return summary;
      },
      {}, [](incarnation_state& st, op_result& res) { st.core.count_advice(res.ranges, 0); },
      [touched = std::move(w.touched)](incarnation_state& st) { st.core.forget_advice(touched); });
}

/// `attributes` of `ref`'s range.
[[nodiscard]] inline auto attributes_step(incarnation_state& s, const byte_ref& ref) {
  (void)s.core.check_refs({&ref, 1}, "attributes");
  return make_step(range_attributes{}, true,
                   [range = ref.range()](backend& b) { return b.attributes(range); });
}

/// The refs of a plan, checked; a plan names refs or ranges (invalid_argument naming `op`).
[[nodiscard]] inline std::span<const byte_ref> checked_plan(incarnation_state& s,
                                                            std::span<const byte_ref> refs,
                                                            std::span<const address_range> ranges,
                                                            const char* op) {
  if (refs.empty() && ranges.empty())
    raise(errc::invalid_argument, std::string(op) + ": no refs or ranges given");
  return refs.empty() ? refs : s.core.check_refs(refs, op);
}

/// A plan's moves (residency_core): its evictions queued on their lane now, its placements the
/// call, on the device's lane; the reply waits for them (issued, or complete when `when` says).
[[nodiscard]] inline auto plan_step(incarnation_state& s, residency_work work, completion when,
                                    bool stream_ordered) {
  s.run_evictions(work);
  const bool has_call = static_cast<bool>(work.place);
  return make_step(work.result, has_call,
                   [place = std::move(work.place)](backend&) { return place(); },
                   {work.place_lane, work.stream, when, stream_ordered});
}

/// `will_access`: an access plan.
[[nodiscard]] inline auto will_access_step(incarnation_state& s, const access_plan_request& r) {
  (void)checked_plan(s, r.refs, r.ranges, "will_access");
  check_stream(*s.runtime, r.stream, "will_access");
  s.core.note(event_kind::prefetch, r.refs, {}, "access plan");
  return plan_step(s, s.residency.will_access(r), r.reply_when, r.stream.handle != nullptr);
}

/// `done_with`: one hold released on each extent the refs or ranges cover (no call).
[[nodiscard]] inline auto done_with_step(incarnation_state& s, std::span<const byte_ref> refs,
                                         std::span<const address_range> ranges) {
  const auto bytes = s.residency.done_with(checked_plan(s, refs, ranges, "done_with"), ranges);
  return make_step(bytes, false, [](backend&) { return std::uint64_t{}; });
}

/// `dead`: the contents of refs or ranges will not be read again.
[[nodiscard]] inline auto dead_step(incarnation_state& s, std::span<const byte_ref> refs,
                                    std::span<const address_range> ranges) {
  return plan_step(s, s.residency.dead(checked_plan(s, refs, ranges, "dead"), ranges, {}),
                   completion::enqueued, false);
}

/// `budget`: device `device`'s budget set (when `bytes` is not 0). The reply, the budget in
/// force, once the evictions down to a lowered one have completed (the call, on the host lane:
/// its stream waited for); at once when nothing passed it. A failed eviction is logged, as a
/// plan's is: the reply still comes.
[[nodiscard]] inline auto budget_step(incarnation_state& s, int device, std::uint64_t bytes) {
  auto change = s.residency.budget(device, bytes);
  auto& work = change.work;
  const bool has_call = static_cast<bool>(work.evict);
  return make_step(change.budget, has_call,
                   [evict = std::move(work.evict), budget = change.budget](backend&) {
                     evict();
                     return budget;
                   },
                   {work.evict_lane, work.stream, completion::complete, false});
}

/// `make(s)` once the driver's counters were taken in (docs/residency.md "The ledger"): their
/// flush is the call, on the general lane (about 10 ms, never under the guard); the attribution
/// and `make` under the guard again. No call while the driver's counters are off.
template <class Make>
[[nodiscard]] auto take_in_step(incarnation_state& s, Make make) {
  using T = decltype(make(s));
  auto in = s.residency.driver_take_in_job();
  return make_step(
      T{}, in != nullptr,
      [in](backend&) {
        in->run();
        return T{};
      },
      {},
      [in, make](incarnation_state& st, T& out) {
        if (in)
          st.residency.take_in(*in);
        st.drain();  // freed regions leave the account first
        out = make(st);
      });
}

/// `residency`: the account and the ledger.
[[nodiscard]] inline auto residency_step(incarnation_state& s) {
  return take_in_step(s, [](incarnation_state& st) { return st.residency.report(); });
}

/// `snapshot`.
[[nodiscard]] inline auto snapshot_step(incarnation_state& s) {
  return take_in_step(
      s, [](incarnation_state& st) { return st.residency.annotated(st.core.snapshot()); });
}

/// `trim`: the block allocator's idle slabs given back; the reply, their bytes, once the
/// general lane has run their frees (and whatever was queued there before).
[[nodiscard]] inline auto trim_step(incarnation_state& s) {
  const std::uint64_t bytes = s.make_room();
  return make_step(bytes, true, [bytes](backend&) { return bytes; });
}

// When a caller's request must wait its turn (go as a message, behind work not done yet): the
// one place that says so for the incarnation's side. The client adds its own requests sent
// ahead (client::on_caller).

/// A prefetch waits behind an unfinished job on its stream.
[[nodiscard]] inline bool waits_its_turn(incarnation_state& s, const prefetch_request& r) {
  return s.lanes.stream_busy(r.stream);
}
/// Advice that reaches the runtime waits: the general lane applies advice in the order the
/// allocator records it, so what it knows of a region's advice is what the runtime has.
[[nodiscard]] inline bool waits_its_turn(incarnation_state& s, const advise_request& r) {
  s.core.check_advice(r);
  return !s.core.changes_nothing(r);
}
/// Attributes never wait.
[[nodiscard]] inline bool waits_its_turn(incarnation_state&, const byte_ref&) {
  return false;
}

}  // namespace uma::detail
