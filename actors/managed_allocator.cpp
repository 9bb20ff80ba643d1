#include <uma/actors/managed_allocator.hpp>

#include <functional>
#include <optional>
#include <type_traits>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <uma/actors/detail/error_reply.hpp>
#include <uma/actors/detail/incarnation.hpp>
#include <uma/actors/detail/lane_allocation.hpp>
#include <uma/actors/detail/operations.hpp>
#include <uma/messages/error_category.hpp>
#include <uma/sys/worker_lanes.hpp>

namespace uma {

namespace {

/// The public interface plus its private extension: wake-ups, ticks, lane jobs, fatal faults.
using allocator_impl = managed_allocator_actor::extend<
    caf::reacts_to<wake_atom>,
    caf::reacts_to<job_done_atom, std::uint64_t, caf::message, caf::error, bool>,
    caf::reacts_to<release_tick_atom>, caf::reacts_to<fault_atom, caf::error>>;

class managed_allocator final : public allocator_impl::base {
 public:
  managed_allocator(caf::actor_config& cfg, allocator_config config,
                    std::shared_ptr<backend> backend)
      : allocator_impl::base(cfg),
        inc_(std::make_shared<detail::incarnation>(std::move(config), std::move(backend))) {
    inc_->control().set_waker([addr = address()] { tell(addr, wake_atom_v); });
    // A fatal error on another thread (a caller call, a slab carved there) ends it too.
    inc_->control().set_on_fatal([addr = address()](errc code, const std::string& what) {
      tell(addr, fault_atom_v, make_caf_error(code, what));
    });
  }

  behavior_type make_behavior() override {
    return {
        [this](allocate_atom, const allocate_request& r) -> caf::result<byte_ref> {
          return guarded<byte_ref>([&] { return allocate(r); });
        },
        [this](prefetch_atom, const prefetch_request& r) {
          return serve(r.refs, detail::prefetch_step, r, false);
        },
        [this](discard_prefetch_atom, const prefetch_request& r) {
          return serve(r.refs, detail::prefetch_step, r, true);
        },
        [this](discard_atom, const discard_request& r) {
          return serve(r.refs, detail::discard_step, r);
        },
        [this](advise_atom, const advise_request& r) {
          return serve(r.refs, detail::advise_step, r);
        },
        [this](attributes_atom, const byte_ref& ref) {
          return serve({&ref, 1}, detail::attributes_step, ref);
        },
        [this](stats_atom) { return fresh().stats(); },
        [this](memory_kind_atom, std::uintptr_t address) {
          return answer(
              [&] { return inc_->runtime()->kind_of(reinterpret_cast<const void*>(address)); });
        },
        [this](can_access_atom, const location& loc, const byte_ref& ref) {
          return answer([&] { return state().core.can_access(loc, ref); });
        },
        [this](regions_atom) -> std::vector<region_info> { return fresh().core.report(); },
        [this](snapshot_atom) { return serve({}, detail::snapshot_step); },
        [this](flush_atom) -> caf::result<allocator_stats> { return flush(); },
        [this](wake_atom) { drain(); },
        [this](release_tick_atom) { on_release_tick(); },
        [this](trim_atom) { return serve({}, detail::trim_step); },
        [this](blocks_atom) { return state().core.blocks(); },
        [this](calls_atom) { return caller_calls_ref(inc_); },
        [this](fault_atom, caf::error& err) { quit(std::move(err)); },
        [this](quota_atom, std::uint64_t b) {
          return answer([&] { return state().core.set_quota(b); });
        },
        [this](job_done_atom, std::uint64_t ticket, caf::message& payload, caf::error& err,
               bool fatal) { job_done(ticket, payload, err, fatal); },
        [this](will_access_atom, const access_plan_request& r) {
          return serve({}, detail::will_access_step, r);
        },
        [this](done_with_atom, const byte_refs& refs) {
          return plan(detail::done_with_step, refs);
        },
        [this](done_ranges_atom, const ranges& r) { return plan(detail::done_with_step, {}, r); },
        [this](dead_atom, const byte_refs& refs) { return plan(detail::dead_step, refs); },
        [this](dead_ranges_atom, const ranges& r) { return plan(detail::dead_step, {}, r); },
        [this](budget_atom, int device, std::uint64_t bytes) {
          return serve({}, detail::budget_step, device, bytes);
        },
        [this](tenant_budget_atom, const std::string& tenant, int device, std::uint64_t bytes) {
          return answer([&] { return state().residency.tenant_budget(tenant, device, bytes); });
        },
        [this](residency_atom) { return serve({}, detail::residency_step); },
    };
  }

  /// The actor runs under its incarnation's guard: a caller call's parts run between resumes.
  resume_result resume(caf::execution_unit* unit, std::size_t max_throughput) override {
    const auto inc = inc_;  // the lock outlives this resume, whatever it ends
    auto running = inc->locked();
    running_ = &running;
    const auto result = allocator_impl::base::resume(unit, max_throughput);
    running_ = nullptr;  // the scheduler holds the actor until resume returned
    return result;
  }

  void on_exit() override {
    // Also run from on_destroy (no handle left; the execution unit is stale, replies go through
    // the scheduler's shared queue), outside a resume: it takes the guard itself then.
    context(nullptr);
    const auto inc = inc_;
    std::optional<detail::incarnation::guard> outside;
    if (running_ == nullptr)
      running_ = &outside.emplace(inc->locked());
    inc->stop(*running_);
    if (outside)
      running_ = nullptr;
    allocator_impl::base::on_exit();
  }

 private:
  /// The state, under the guard of the resume running (or of the stop).
  detail::incarnation_state& state() { return **running_; }
  allocator_impl self() { return caf::actor_cast<allocator_impl>(this); }

  // -- request handlers (throw; `guarded` turns it into the reply) -----------------------------

  /// Runs one operation: its step (`make`: a detail::*_step) made under the guard, its backend
  /// call on a lane with `keep` (the request's refs) alive until it returned; the reply comes
  /// from here once the call returned (`enqueued`) or its stream reached it (`complete`), after
  /// `end` (or `failed`) ran under the guard.
  template <class Make, class... Args,
            class Step = std::invoke_result_t<Make&, detail::incarnation_state&, const Args&...>,
            class R = decltype(Step::summary)>
  caf::result<R> serve(std::span<const byte_ref> keep, Make make, const Args&... args) {
    std::optional<Step> step;
    return guarded<R>([&]() -> caf::result<R> {
      step.emplace(make(state(), args...));
      if (!step->call) {
        step->end(state(), step->summary);
        return std::move(step->summary);
      }
      auto rp = make_response_promise<R>();
      detail::finish_fn done = [this, rp, end = std::move(step->end), undo = std::move(step->undo)](
                                   caf::message& payload, caf::error& err) mutable {
        if (!err) {
          auto value = payload.get_as<R>(0);
          end(state(), value);
          rp.deliver(std::move(value));
          return;
        }
        undo(state());
        state().core.count_failure(err);
        rp.deliver(std::move(err));
      };
      const auto queued = detail::failure_in([&] {
        auto job = [b = inc_->runtime(), call = std::move(*step->call),
                    refs = std::vector<byte_ref>(keep.begin(), keep.end())] { return call(*b); };
        const auto& to = step->route;
        state().jobs.post(self(), to.lane, std::move(job), to.stream, to.when, done,
                          to.stream_ordered);
      });
      if (queued) {  // the promise owns the reply now: answer through it
        caf::message none;
        auto err = make_caf_error(errc::backend_error,
                                  "could not queue the backend call: " + queued->what);
        done(none, err);
      }
      return rp;
    });
  }

  using byte_refs = std::vector<byte_ref>;
  using ranges = std::vector<address_range>;
  /// A plan that names refs or ranges (done_with, dead).
  template <class Make, class Step = std::invoke_result_t<Make&, detail::incarnation_state&,
                                                          std::span<const byte_ref>,
                                                          std::span<const address_range>>>
  caf::result<decltype(Step::summary)> plan(Make make, std::span<const byte_ref> refs,
                                            std::span<const address_range> r = {}) {
    return serve({}, make, refs, r);
  }

  /// Replies once every lane has run what was queued before: a barrier across the lanes.
  caf::typed_response_promise<allocator_stats> flush() {
    drain();
    auto rp = make_response_promise<allocator_stats>();
    state().jobs.barrier(self(), [this, rp](caf::message&, caf::error& err) mutable {
      if (err)
        rp.deliver(std::move(err));  // cut short by the stop
      else
        rp.deliver(state().stats());
    });
    return rp;
  }

  /// A lane's job finished: its completion runs here, under the guard.
  void job_done(std::uint64_t ticket, caf::message& payload, caf::error& err, bool fatal) {
    auto finish = state().jobs.take(ticket);
    if (!finish)
      return;
    auto reason = fatal ? err : caf::error{};
    finish(payload, err);
    if (fatal)
      quit(std::move(reason));  // the supervisor decides what comes next
  }

  /// Serves `r` here when it can (a block under the `pool` policy, else a region); a refusal is
  /// one job on the general lane behind the frees queued before it (make_room;
  /// actors/detail/lane_allocation.hpp), as is a tier's memory (docs/design.md "Tiers").
  caf::result<byte_ref> allocate(const allocate_request& r) {
    auto req = state().checked(r);
    if (req.kind == memory_kind::cuda_managed) {
      try {
        return state().core.allocate_now(req, r.stream);
      } catch (const error& e) {
        if (!detail::retried_on_lane(e))
          throw;
        (void)state().make_room();
      }
    }
    auto rp = make_response_promise<byte_ref>();
    auto reply = [this, rp, attach = req.attach](caf::message& payload, caf::error& err) mutable {
      if (!err)
        err = detail::error_of(
            [&] { rp.deliver(detail::lane_allocation_ref(state(), payload, attach)); });
      if (err) {
        state().core.count_failure(err);
        rp.deliver(std::move(err));
      }
    };
    const auto queued = detail::error_of([&] {
      detail::post_lane_allocation(state().jobs, self(), state().core, std::move(req), r.stream,
                                   std::move(reply));
    });
    if (queued) {  // the promise owns the reply now: answer through it
      state().core.count_failure(queued);
      rp.deliver(queued);
    }
    return rp;
  }

  /// Runs a handler body; what it throws becomes the error reply (detail::failure_of), counted.
  /// A fatal error is replied first, then ends this incarnation with it as exit reason.
  template <class R, class F>
  caf::result<R> guarded(F&& f) {
    try {
      drain();
      return caf::result<R>(f());
    } catch (...) {
      const auto failed = detail::failure_of(std::current_exception());
      state().core.count_failure(failed.code);
      if (!failed.fatal)
        return failed.reply();
      auto rp = make_response_promise<R>();
      rp.deliver(failed.reply());
      quit(failed.reply());
      return rp;
    }
  }

  /// `guarded` for a body that returns its reply's value.
  template <class F>
  caf::result<std::decay_t<std::invoke_result_t<F&>>> answer(F&& f) {
    return guarded<std::decay_t<decltype(f())>>(std::forward<F>(f));
  }

  // -- releases (actors/detail/release_ticker.hpp) ---------------------------------------------

  void drain() {
    if (state().ticker.drain())
      delayed_send(this, detail::release_tick, release_tick_atom_v);
  }
  void on_release_tick() {
    if (state().ticker.tick())
      delayed_send(this, detail::release_tick, release_tick_atom_v);
  }
  /// The state once the queued releases are freed: what every reply reads.
  detail::incarnation_state& fresh() {
    drain();
    return state();
  }

  /// Shared with callers, who may hold it past this actor (it then refuses every call).
  std::shared_ptr<detail::incarnation> inc_;
  detail::incarnation::guard* running_ = nullptr;  ///< the resume's guard, while it runs
  /// Sends `xs` to the actor at `addr` from any thread, if it still runs.
  template <class... Ts>
  static void tell(const caf::actor_addr& addr, Ts&&... xs) {
    if (auto hdl = caf::actor_cast<caf::strong_actor_ptr>(addr))
      caf::anon_send(caf::actor_cast<allocator_impl>(hdl), std::forward<Ts>(xs)...);
  }
};

}  // namespace

managed_allocator_actor spawn_allocator(caf::actor_system& sys, allocator_config config) {
  auto b = config.backend.resolve();
  detail::residency_core::check(config, *b);  // device budgets: refused here, before a spawn
  if (config.supervision.detached)
    return sys.spawn<managed_allocator, caf::detached>(std::move(config), b);
  return sys.spawn<managed_allocator>(std::move(config), b);
}

}  // namespace uma
