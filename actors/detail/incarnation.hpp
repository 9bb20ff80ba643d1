#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/detail/allocation_core.hpp>
#include <uma/actors/detail/core_lock.hpp>
#include <uma/actors/detail/error_reply.hpp>
#include <uma/actors/detail/off_loop_jobs.hpp>
#include <uma/actors/detail/release_ticker.hpp>
#include <uma/actors/detail/request_checks.hpp>
#include <uma/actors/detail/residency_core.hpp>
#include <uma/memory/advice_ops.hpp>
#include <uma/memory/control_block.hpp>
#include <uma/messages/caller_calls.hpp>
#include <uma/sys/worker_lanes.hpp>

namespace uma::detail {

/// What an incarnation's lock guards: reachable only through incarnation::guard.
struct incarnation_state {
  /// `lanes` is joined before the state goes (incarnation::close).
  incarnation_state(const allocator_config& config, std::shared_ptr<backend> b,
                    const std::shared_ptr<control_block>& control, worker_lanes& lanes);

  /// The checks of an allocate request before anything is allocated (device memory also
  /// against its device's budget).
  [[nodiscard]] allocation_request checked(const allocate_request& r);
  /// Registers memory the stack returned for a request attached `attach`; device memory is
  /// charged to its budget and what made room there is evicted.
  [[nodiscard]] byte_ref adopt(const allocation& memory, attach_flag attach);
  /// Queues the evictions of `work` (a plan's or a reservation's) on their lane.
  void run_evictions(residency_work& work) {
    if (work.evict)
      lanes.post(work.evict_lane, std::move(work.evict));
  }
  /// Room for a refused allocation's one more try: the block allocator's idle slabs and the
  /// queued releases go back (their frees queued on the general lane). Returns the slabs' bytes.
  std::uint64_t make_room();
  /// Handles the releases queued by last drops, if any, as every request does first. The
  /// actor drains through `ticker` instead, which also tells it to tick.
  void drain() {
    if (control.has_releases())
      core.drain_releases();
  }
  /// The `stats` reply.
  [[nodiscard]] allocator_stats stats() const { return residency.with_totals(core.stats()); }

  std::shared_ptr<backend> runtime;
  control_block& control;
  worker_lanes& lanes;
  allocation_core core;
  residency_core residency;
  release_ticker ticker;
  off_loop_jobs jobs;
};

/// One request's backend call, decided under the guard (its checks made and its history noted):
/// `call` runs on an executor with no lock held (the caller's thread, or a lane for the actor),
/// then `end` counts it under the guard again; `failed` undoes, under the guard, what a failed
/// call leaves untrue. No `call`: nothing for the runtime, `summary` is the reply.
template <class Reply, class Call, class End, class Failed>
struct backend_step {
  Reply summary;
  std::optional<Call> call;  ///< Reply(backend&)
  End end;                   ///< void(incarnation_state&, Reply&)
  Failed failed;             ///< void(incarnation_state&)
  std::size_t lane = worker_lanes::general;
  stream_view stream{};
  completion when = completion::enqueued;
  bool stream_ordered = false;  ///< a stream's operations go out in request order
};

/// Nothing to undo.
struct nothing_to_undo {
  void operator()(incarnation_state&) const noexcept {}
};

/// Nothing to count: a caller's executor takes no guard after the call.
struct nothing_to_count {
  template <class Reply>
  void operator()(incarnation_state&, Reply&) const noexcept {}
};

template <class Reply, class Call, class End, class Failed = nothing_to_undo>
[[nodiscard]] backend_step<Reply, Call, End, Failed> make_step(Reply summary, Call call,
                                                               bool has_call, End end,
                                                               Failed failed = {}) {
  return {std::move(summary), has_call ? std::optional<Call>(std::move(call)) : std::nullopt,
          std::move(end), std::move(failed)};
}

/// `prefetch` (a discard first when `discard_first`).
[[nodiscard]] inline auto prefetch_step(incarnation_state& s, const prefetch_request& r,
                                        bool discard_first) {
  auto w = s.core.prefetch_work_for(r, discard_first);
  const auto lane = worker_lanes::for_destinations(w.merged.locations);
  auto step = make_step(
      w.summary,
      [m = std::move(w.merged), stream = r.stream, discard_first, summary = w.summary](backend& b) {
        if (discard_first)
          b.discard_prefetch(m.ranges, m.locations, stream);
        else
          b.prefetch(m.ranges, m.locations, stream);
        return summary;
      },
      true,
      [discard_first](incarnation_state& st, op_result& res) {
        st.core.count_prefetch(res, discard_first);
      });
  step.lane = lane;
  step.stream = r.stream;
  step.when = r.reply_when;
  step.stream_ordered = true;
  return step;
}

/// `discard`.
[[nodiscard]] inline auto discard_step(incarnation_state& s, const discard_request& r) {
  (void)s.core.check_refs(r.refs, "discard");
  check_stream(*s.runtime, r.stream, "discard");
  s.core.note(event_kind::discard, r.refs);
  auto summary = summarize(ranges_of(r.refs), r.reply_when);
  auto merged = s.core.coalesced(r.refs, {});
  summary.backend_ranges = merged.ranges.size();
  auto step = make_step(
      summary,
      [ranges = std::move(merged.ranges), stream = r.stream, summary](backend& b) {
        b.discard(ranges, stream);
        return summary;
      },
      true, [](incarnation_state& st, op_result& res) { st.core.count_discard(res); });
  step.stream = r.stream;
  step.when = r.reply_when;
  step.stream_ordered = true;
  return step;
}

/// `advise`: advice the allocator knows to change nothing makes no call.
[[nodiscard]] inline auto advise_step(incarnation_state& s, const advise_request& r) {
  auto w = s.core.checked_advice(r);
  const bool has_call = !w.todo.empty();
  return make_step(
      w.summary,
      [todo = std::move(w.todo), what = r.what, where = r.where, summary = w.summary](backend& b) {
        apply_advice_whole(b, todo, what, where);
        return summary;
      },
      has_call, [](incarnation_state& st, op_result& res) { st.core.count_advice(res.ranges, 0); },
      [touched = std::move(w.touched)](incarnation_state& st) { st.core.forget_advice(touched); });
}

/// `attributes` of `ref`'s range.
[[nodiscard]] inline auto attributes_step(incarnation_state& s, const byte_ref& ref) {
  (void)s.core.check_refs({&ref, 1}, "attributes");
  return make_step(
      range_attributes{}, [range = ref.range()](backend& b) { return b.attributes(range); }, true,
      nothing_to_count{});
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
  auto step = make_step(
      work.result, [place = std::move(work.place)](backend&) { return place(); }, has_call,
      nothing_to_count{});
  step.lane = work.place_lane;
  step.stream = work.stream;
  step.when = when;
  step.stream_ordered = stream_ordered;
  return step;
}

/// `will_access`: an access plan.
[[nodiscard]] inline auto will_access_step(incarnation_state& s, const access_plan_request& r) {
  (void)checked_plan(s, r.refs, r.ranges, "will_access");
  check_stream(*s.runtime, r.stream, "will_access");
  s.core.note(event_kind::prefetch, r.refs, {}, "access plan");
  return plan_step(s, s.residency.will_access(r), r.reply_when, r.stream.handle != nullptr);
}

/// `dead`: the contents of refs or ranges will not be read again.
[[nodiscard]] inline auto dead_step(incarnation_state& s, std::span<const byte_ref> refs,
                                    std::span<const address_range> ranges) {
  return plan_step(s, s.residency.dead(checked_plan(s, refs, ranges, "dead"), ranges, {}),
                   completion::enqueued, false);
}

/// `make(s)` once the driver's counters were taken in (docs/residency.md "The ledger"): their
/// flush is the call, on the general lane (about 10 ms, never under the guard); the attribution
/// and `make` under the guard again. No call while the driver's counters are off.
template <class Make>
[[nodiscard]] auto take_in_step(incarnation_state& s, Make make) {
  using T = decltype(make(s));
  auto in = s.residency.driver_take_in_job();
  const bool has_call = in != nullptr;
  return make_step(
      T{},
      [in](backend&) {
        in->run();
        return T{};
      },
      has_call,
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
  return make_step(
      bytes, [bytes](backend&) { return bytes; }, true, nothing_to_count{});
}

/// An allocator incarnation (docs/design.md "The incarnation"): the control block, the
/// allocation and residency cores, the worker lanes, the jobs in flight, and the lock. The state
/// is reachable only through a guard; the actor holds one while it runs (each resume), a caller
/// call holds one for each part that reads or changes the state. Each request is one operation
/// (the *_step functions): the actor's handlers and the caller calls below both run it.
class incarnation final : public caller_calls {
 public:
  /// The lock held, and the state it guards. Move-only.
  class guard {
   public:
    guard(guard&& other) noexcept
        : lock_(std::exchange(other.lock_, nullptr)), state_(other.state_) {}
    guard(const guard&) = delete;
    guard& operator=(const guard&) = delete;
    guard& operator=(guard&&) = delete;
    ~guard() {
      if (lock_ != nullptr)
        lock_->unlock();
    }
    [[nodiscard]] incarnation_state* operator->() const noexcept { return state_; }
    [[nodiscard]] incarnation_state& operator*() const noexcept { return *state_; }

   private:
    friend class incarnation;
    guard(core_lock& lock, incarnation_state* state) noexcept : lock_(&lock), state_(state) {}
    core_lock* lock_;
    incarnation_state* state_;
  };

  incarnation(allocator_config config, std::shared_ptr<backend> b);
  incarnation(const incarnation&) = delete;
  incarnation& operator=(const incarnation&) = delete;
  /// `close`, if the stop did not run.
  ~incarnation() override;

  /// A caller's guard: waits for the lock until `until` (then throws timeout); throws
  /// allocator_stopped once the incarnation has ended.
  [[nodiscard]] guard locked(deadline until);
  /// The actor's guard: waits as long as it takes.
  [[nodiscard]] guard locked() noexcept;
  /// True on the thread holding the guard.
  [[nodiscard]] bool held_here() const noexcept { return lock_.held_here(); }

  [[nodiscard]] std::optional<byte_ref> allocate(const allocate_request& r,
                                                 deadline until) override;
  [[nodiscard]] std::optional<op_result> prefetch(const prefetch_request& r, bool discard_first,
                                                  deadline until) override;
  [[nodiscard]] std::optional<op_result> advise(const advise_request& r, deadline until) override;
  [[nodiscard]] range_attributes attributes(const byte_ref& ref, deadline until) override;
  [[nodiscard]] std::optional<allocator_stats> stats(deadline until) override;
  [[nodiscard]] bool ended() const noexcept override;

  // -- the actor's side ---------------------------------------------------------------------------

  [[nodiscard]] const allocator_config& config() const noexcept { return config_; }
  [[nodiscard]] const std::shared_ptr<backend>& runtime() const noexcept { return backend_; }
  [[nodiscard]] control_block& control() noexcept { return *control_; }
  /// The stop sequence (actors/detail/allocator_stop.hpp) under `g`: no caller call starts from
  /// now on, those whose backend call runs are waited for, then `close`. Once only.
  void stop(guard& g) noexcept;

 private:
  /// Runs `part` under a caller's guard; what it throws is counted there, then rethrown
  /// (after a fatal error is reported, with no lock held).
  template <class Part>
  auto under(deadline until, Part&& part);
  /// The caller's executor for an operation: `waits` (under the guard) says whether the request
  /// must go as a message, behind work not done yet; else `begin` makes its step.
  template <class Waits, class Begin>
  auto run_here(deadline until, Waits&& waits, Begin&& begin);
  /// A failure of a backend call made with no lock held: counted (best effort), then thrown.
  template <class Failed>
  [[noreturn]] void count_then_raise(const failure& f, deadline until, Failed&& undo);
  [[noreturn]] void raise_after(const failure& f);
  /// A region refused on the caller's thread: the actor's one more try, waited for here.
  [[nodiscard]] allocation retry_on_lane(const allocation_request& req, deadline until);
  void finished() noexcept;
  /// Joins the lanes, then destroys the state their jobs reach: in this order, stated here
  /// rather than left to the members' declaration order.
  void close() noexcept;

  allocator_config config_;
  std::shared_ptr<backend> backend_;
  std::shared_ptr<control_block> control_;
  worker_lanes lanes_;
  core_lock lock_;
  std::unique_ptr<incarnation_state> state_;  // made by the constructor, destroyed by close
  std::shared_ptr<memory_resource> stack_;    // the top of the resource stack
  std::atomic<bool> ended_{false};            // set under the lock (stop); read anywhere
  /// Caller calls whose backend call runs. A call counted here never waits for the lock: the
  /// stop holds it while it waits for this to reach 0.
  std::atomic<std::uint32_t> active_{0};
};

}  // namespace uma::detail
