#include <uma/actors/managed_allocator.hpp>

#include <functional>
#include <optional>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <uma/actors/detail/allocation_core.hpp>
#include <uma/actors/detail/allocator_stop.hpp>
#include <uma/actors/detail/caller_side.hpp>
#include <uma/actors/detail/error_reply.hpp>
#include <uma/actors/detail/lane_allocation.hpp>
#include <uma/actors/detail/off_loop_jobs.hpp>
#include <uma/actors/detail/release_ticker.hpp>
#include <uma/actors/detail/request_checks.hpp>
#include <uma/actors/detail/residency_core.hpp>
#include <uma/memory/advice_ops.hpp>
#include <uma/memory/location_rules.hpp>
#include <uma/messages/error_category.hpp>
#include <uma/sys/log.hpp>
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
        config_(std::move(config)),
        backend_(std::move(backend)),
        control_(std::make_shared<detail::control_block>(config_.supervision.generation, backend_)),
        core_(config_, backend_, control_, lanes_) {
    core_.set_on_free([this](std::uint64_t id) { residency_.forget(id); });
    control_->set_waker([addr = address()] { tell(addr, wake_atom_v); });
    // A fatal error on another thread (a caller call, a slab carved there) ends it too.
    control_->set_on_fatal([addr = address()](errc code, const std::string& what) {
      tell(addr, fault_atom_v, make_caf_error(code, what));
    });
  }

  ~managed_allocator() override { lanes_.drain_and_stop(); }  // post_stop did; idempotent

  behavior_type make_behavior() override {
    return {
        [this](allocate_atom, const allocate_request& r) -> caf::result<byte_ref> {
          return guarded<byte_ref>([&] { return allocate(r); });
        },
        [this](prefetch_atom, const prefetch_request& r) -> caf::result<op_result> {
          return guarded<op_result>([&] { return prefetch(r, false); });
        },
        [this](discard_prefetch_atom, const prefetch_request& r) -> caf::result<op_result> {
          return guarded<op_result>([&] { return prefetch(r, true); });
        },
        [this](discard_atom, const discard_request& r) -> caf::result<op_result> {
          return guarded<op_result>([&] { return discard(r); });
        },
        [this](advise_atom, const advise_request& r) -> caf::result<op_result> {
          return guarded<op_result>([&] { return advise(r); });
        },
        [this](attributes_atom, const byte_ref& ref) { return attributes(ref); },
        [this](stats_atom) { return residency_.with_totals(fresh().stats()); },
        [this](memory_kind_atom, std::uintptr_t address) -> caf::result<memory_kind> {
          return guarded<memory_kind>(
              [&] { return backend_->kind_of(reinterpret_cast<const void*>(address)); });
        },
        [this](can_access_atom, const location& loc, const byte_ref& ref) -> caf::result<bool> {
          return guarded<bool>([&] {
            check_refs({&ref, 1}, "can_access");
            return core_.can_access(loc, ref);
          });
        },
        [this](regions_atom) -> std::vector<region_info> { return fresh().report(); },
        [this](snapshot_atom) { return snapshot(); },
        [this](flush_atom) -> caf::result<allocator_stats> { return flush(); },
        [this](wake_atom) { drain(); },
        [this](release_tick_atom) { on_release_tick(); },
        [this](trim_atom) -> caf::result<std::uint64_t> {
          return guarded<std::uint64_t>([&] { return trim(); });
        },
        [this](blocks_atom) { return core_.blocks(); },
        [this](calls_atom) { return caller_calls_ref(calls_); },
        [this](fault_atom, caf::error& err) { quit(std::move(err)); },
        [this](quota_atom, std::uint64_t bytes) -> caf::result<std::uint64_t> {
          return guarded<std::uint64_t>([&] { return core_.set_quota(bytes); });
        },
        [this](job_done_atom, std::uint64_t ticket, caf::message& payload, caf::error& err,
               bool fatal) { job_done(ticket, payload, err, fatal); },
        [this](will_access_atom, const access_plan_request& r) { return plan_access(r); },
        [this](done_with_atom, const std::vector<byte_ref>& refs) { return done_with(refs, {}); },
        [this](done_ranges_atom, const std::vector<address_range>& r) { return done_with({}, r); },
        [this](dead_atom, const std::vector<byte_ref>& refs) { return dead(refs, {}); },
        [this](dead_ranges_atom, const std::vector<address_range>& r) { return dead({}, r); },
        [this](budget_atom, int device, std::uint64_t bytes) { return budget(device, bytes); },
        [this](tenant_budget_atom, const std::string& tenant, int device, std::uint64_t bytes) {
          return tenant_budget(tenant, device, bytes);
        },
        [this](residency_atom) { return report_residency(); },
    };
  }

  /// The actor runs under its core lock: caller calls (actors/detail/caller_side.hpp) read and
  /// change its state only while it does not run.
  resume_result resume(caf::execution_unit* unit, std::size_t max_throughput) override {
    const auto calls = calls_;  // the lock outlives this resume, whatever it ends
    std::lock_guard running(calls->lock());
    return allocator_impl::base::resume(unit, max_throughput);
  }

  void on_exit() override {
    // Also run from on_destroy (no handle left; the execution unit is stale, replies go through
    // the scheduler's shared queue), outside a resume: it takes the core lock itself then.
    context(nullptr);
    const auto calls = calls_;
    std::unique_lock<detail::core_lock> outside(calls->lock(), std::defer_lock);
    if (!calls->lock().held_here())
      outside.lock();
    post_stop();
    allocator_impl::base::on_exit();
  }

 private:
  // -- request handlers (throw uma::error; `guarded` turns it into the reply) -----------------

  /// Replies once every lane has run what was queued before: a barrier across the lanes.
  caf::typed_response_promise<allocator_stats> flush() {
    drain();
    auto rp = make_response_promise<allocator_stats>();
    jobs_.barrier(caf::actor_cast<allocator_impl>(this),
                  [this, rp](caf::message&, caf::error& err) mutable {
                    if (err)
                      rp.deliver(std::move(err));  // cut short by the stop
                    else
                      rp.deliver(residency_.with_totals(core_.stats()));
                  });
    return rp;
  }

  caf::result<range_attributes> attributes(const byte_ref& ref) {
    return guarded<range_attributes>([&] {
      check_refs({&ref, 1}, "attributes");
      return offload<range_attributes>(
          worker_lanes::general, [b = backend_, ref] { return b->attributes(ref.range()); }, {},
          completion::enqueued, [](range_attributes&) {});
    });
  }

  /// Replies the bytes of the idle slabs given back once the general lane has run their frees
  /// (and whatever a caller's trim queued there before).
  caf::typed_response_promise<std::uint64_t> trim() {
    const auto bytes = give_back_idle_slabs();
    return offload<std::uint64_t>(
        worker_lanes::general, [bytes] { return bytes; }, {}, completion::enqueued,
        [](std::uint64_t&) {});
  }

  /// A lane's job finished: its completion runs here, on the actor's thread.
  void job_done(std::uint64_t ticket, caf::message& payload, caf::error& err, bool fatal) {
    auto finish = jobs_.take(ticket);
    if (!finish)
      return;
    auto reason = fatal ? err : caf::error{};
    finish(payload, err);
    if (fatal)
      quit(std::move(reason));  // the supervisor decides what comes next
  }

  /// Serves `r` on the actor's thread when it can (a block under the `pool` policy, else a
  /// region); a refusal is one job on the general lane behind the frees queued before it
  /// (actors/detail/lane_allocation.hpp), as is a tier's memory (docs/design.md "Tiers"); device
  /// memory is checked against its budget first and reserved there once adopted.
  caf::result<byte_ref> allocate(const allocate_request& r) {
    auto req = core_.checked_request(r);
    if (req.kind == memory_kind::cuda_device)  // before anything is allocated
      residency_.check_reserve(req.device, req.bytes);
    if (req.kind == memory_kind::cuda_managed)
      if (auto ref = try_now(req, r.stream))
        return std::move(*ref);
    auto rp = make_response_promise<byte_ref>();
    auto reply = [this, rp, attach = req.attach](caf::message& payload, caf::error& err) mutable {
      if (!err)
        err = detail::error_of([&] {
          auto ref = detail::lane_allocation_ref(core_, payload, attach);
          if (detail::record_of(ref)->kind == memory_kind::cuda_device) {
            auto made_room = residency_.reserve(ref);
            run_evictions(made_room);
          }
          rp.deliver(std::move(ref));
        });
      if (err) {
        core_.count_failure(err);
        rp.deliver(std::move(err));
      }
    };
    const auto queued = detail::error_of([&] {
      detail::post_lane_allocation(jobs_, caf::actor_cast<allocator_impl>(this), core_,
                                   std::move(req), r.stream, std::move(reply));
    });
    if (queued) {  // the promise owns the reply now: answer through it
      core_.count_failure(queued);
      rp.deliver(queued);
    }
    return rp;
  }

  /// The actor's own try: an allocation, or nullopt when a refusal goes to the general lane,
  /// behind the frees of the queued releases and of the block allocator's idle slabs.
  std::optional<byte_ref> try_now(const allocation_request& req, stream_view stream) {
    try {
      return core_.allocate_now(req, stream);
    } catch (const error& e) {
      if (!detail::retried_on_lane(e))
        throw;
      (void)give_back_idle_slabs();  // drains the queued releases too
      return std::nullopt;
    }
  }

  /// The block allocator's idle slabs come back as releases, drained at once with any others
  /// queued: their cudaFree is queued on the general lane now. Returns their bytes.
  std::uint64_t give_back_idle_slabs() {
    const auto bytes = core_.blocks()->trim();
    drain();
    return bytes;
  }

  caf::typed_response_promise<op_result> prefetch(const prefetch_request& r, bool discard_first) {
    auto work = core_.prefetch_work_for(r, discard_first);
    const auto lane = worker_lanes::for_destinations(work.merged.locations);
    return offload<op_result>(
        lane,
        [b = backend_, merged = std::move(work.merged), stream = r.stream, keep = r.refs,
         discard_first, summary = work.summary] {
          if (discard_first)
            b->discard_prefetch(merged.ranges, merged.locations, stream);
          else
            b->prefetch(merged.ranges, merged.locations, stream);
          return summary;
        },
        r.stream, r.reply_when,
        [this, discard_first](op_result& res) { core_.count_prefetch(res, discard_first); }, {},
        true);
  }

  caf::typed_response_promise<op_result> discard(const discard_request& r) {
    check_refs(r.refs, "discard");
    check_stream(r.stream, "discard");
    core_.note(event_kind::discard, r.refs);
    auto summary = detail::summarize(detail::ranges_of(r.refs), r.reply_when);
    auto merged = core_.coalesced(r.refs, {});
    summary.backend_ranges = merged.ranges.size();
    return offload<op_result>(
        worker_lanes::general,
        [b = backend_, ranges = std::move(merged.ranges), stream = r.stream, keep = r.refs,
         summary] {
          b->discard(ranges, stream);
          return summary;
        },
        r.stream, r.reply_when, [this](op_result& res) { core_.count_discard(res); }, {}, true);
  }

  /// Advice the allocator knows to change nothing is skipped (tracked per whole region).
  caf::result<op_result> advise(const advise_request& r) {
    auto work = core_.checked_advice(r);
    if (work.todo.empty()) {
      core_.count_advice(work.summary.ranges, 0);
      return work.summary;
    }
    return offload<op_result>(
        worker_lanes::general,
        [b = backend_, todo = std::move(work.todo), what = r.what, where = r.where, keep = r.refs,
         summary = work.summary] {
          apply_advice_whole(*b, todo, what, where);
          return summary;
        },
        {}, completion::enqueued, [this](op_result& res) { core_.count_advice(res.ranges, 0); },
        [this, touched = std::move(work.touched)] { core_.forget_advice(touched); });
  }

  // -- residency (actors/detail/residency_core.hpp): plans, budgets, the account ---------------
  caf::result<residency_result> plan_access(const access_plan_request& r) {
    return plan(
        [&] {
          check_plan(r.refs, r.ranges, "will_access");
          check_stream(r.stream, "will_access");
          core_.note(event_kind::prefetch, r.refs, {}, "access plan");
          return residency_.will_access(r);
        },
        r.reply_when, r.stream.handle != nullptr);
  }
  caf::result<residency_result> dead(std::span<const byte_ref> refs,
                                     std::span<const address_range> ranges) {
    return plan([&] { return residency_.dead(check_plan(refs, ranges, "dead"), ranges, {}); },
                completion::enqueued, false);
  }
  /// Queues the evictions of `work` (a plan's or a reservation's) on their lane.
  void run_evictions(detail::residency_work& work) {
    if (work.evict)
      lanes_.post(work.evict_lane, std::move(work.evict));
  }
  /// Decides a plan (`decide` validates first), then queues its moves: evictions on the host
  /// lane, placements on the device's; the reply waits for the placements (issued or complete).
  template <class Decide>
  caf::result<residency_result> plan(Decide decide, completion when, bool stream_ordered) {
    std::optional<detail::residency_work> w;
    auto reply = guarded<residency_result>([&] {
      auto work = decide();
      run_evictions(work);
      return (w = std::move(work))->result;
    });
    if (!w || !w->place)
      return reply;
    return offload<residency_result>(
        w->place_lane, std::move(w->place), w->stream, when, [](residency_result&) {}, {},
        stream_ordered);
  }
  /// `make()` once the driver's counters were taken in (docs/residency.md "The ledger"): their
  /// flush runs on the general lane; the attribution and `make` on the actor's thread.
  template <class T, class Make>
  caf::result<T> after_take_in(Make make) {
    auto in = residency_.driver_take_in_job();
    if (!in)
      return make();
    const auto run = [in] {
      in->run();
      return T{};
    };
    return offload<T>(worker_lanes::general, run, {}, completion::enqueued,
                      [this, in, make](T& out) {
                        residency_.take_in(*in);
                        out = make();
                      });
  }
  caf::result<residency_report> report_residency() {
    return after_take_in<residency_report>([this] {
      drain();  // freed regions leave the account first
      return residency_.report();
    });
  }
  caf::result<allocator_snapshot> snapshot() {
    return after_take_in<allocator_snapshot>(
        [this] { return residency_.annotated(fresh().snapshot()); });
  }
  caf::result<std::uint64_t> tenant_budget(const std::string& tenant, int d, std::uint64_t b) {
    return guarded<std::uint64_t>([&] { return residency_.tenant_budget(tenant, d, b); });
  }
  caf::result<std::uint64_t> budget(int device, std::uint64_t bytes) {
    return guarded<std::uint64_t>([&] { return residency_.budget(device, bytes); });
  }
  caf::result<std::uint64_t> done_with(std::span<const byte_ref> refs,
                                       std::span<const address_range> ranges) {
    return guarded<std::uint64_t>(
        [&] { return residency_.done_with(check_plan(refs, ranges, "done_with"), ranges); });
  }

  // -- validation (actors/request_checks) -------------------------------------------------------

  /// A plan names refs (returned once checked) or ranges, found once queued releases are freed.
  std::span<const byte_ref> check_plan(std::span<const byte_ref> refs,
                                       std::span<const address_range> ranges, const char* op) {
    if (refs.empty() && ranges.empty())
      raise(errc::invalid_argument, std::string(op) + ": no refs or ranges given");
    if (!ranges.empty())
      drain();
    return refs.empty() ? refs : check_refs(refs, op);
  }
  /// Returns `refs` once checked, so that a handler can pass them on in one expression.
  std::span<const byte_ref> check_refs(std::span<const byte_ref> refs, const char* op) {
    return core_.check_refs(refs, op);
  }
  void check_stream(stream_view s, const char* op) { detail::check_stream(*backend_, s, op); }

  // -- off-loop work -----------------------------------------------------------------------------

  /// Runs `job` on `lane` and replies with its result from the actor thread, once the call
  /// returned (`enqueued`) or once `stream` reached it (`complete`). `on_success` runs on the
  /// actor thread before the reply (stats; may rewrite the reply).
  template <class T, class Job, class OnSuccess>
  caf::typed_response_promise<T> offload(std::size_t lane, Job job, stream_view stream,
                                         completion when, OnSuccess on_success,
                                         std::function<void()> on_failure = {},
                                         bool stream_ordered = false) {
    auto rp = make_response_promise<T>();
    try {
      jobs_.post(
          caf::actor_cast<allocator_impl>(this), lane, std::move(job), stream, when,
          [this, rp, on_success, on_failure](caf::message& payload, caf::error& err) mutable {
            if (err) {
              if (on_failure)
                on_failure();
              core_.count_failure(err);
              rp.deliver(std::move(err));
              return;
            }
            T value = payload.get_as<T>(0);
            on_success(value);
            rp.deliver(std::move(value));
          },
          stream_ordered);
    } catch (const std::exception& e) {
      // The promise owns the reply now: answer through it.
      if (on_failure)
        on_failure();
      core_.count_failure(errc::backend_error);
      rp.deliver(make_caf_error(errc::backend_error,
                                std::string("could not queue the backend call: ") + e.what()));
    }
    return rp;
  }

  // -- stop ------------------------------------------------------------------------------------

  void post_stop() noexcept {
    detail::stop_allocator(
        {config_, *control_, lanes_, *backend_, core_, residency_, jobs_.pending(), *calls_});
  }

  // -- helpers -----------------------------------------------------------------------------------

  /// Runs a handler body; a thrown uma::error becomes the error reply (and a failure count).
  template <class R, class F>
  caf::result<R> guarded(F&& f) {
    try {
      drain();
      return caf::result<R>(f());
    } catch (const error& e) {
      core_.count_failure(e.code());
      if (!is_fatal(e))
        return make_caf_error(e);
      // Reply first, then end this incarnation with the error as exit reason.
      auto rp = make_response_promise<R>();
      rp.deliver(make_caf_error(e));
      quit(make_caf_error(e));
      return rp;
    } catch (const std::bad_alloc&) {
      core_.count_failure(errc::out_of_memory);
      return make_caf_error(errc::out_of_memory, "host memory exhausted while serving a request");
    } catch (const std::exception& e) {
      core_.count_failure(errc::backend_error);
      return make_caf_error(errc::backend_error, e.what());
    }
  }

  // -- releases (actors/detail/release_ticker.hpp) ---------------------------------------------

  void drain() {
    if (ticker_.drain())
      delayed_send(this, detail::release_tick, release_tick_atom_v);
  }
  void on_release_tick() {
    if (ticker_.tick())
      delayed_send(this, detail::release_tick, release_tick_atom_v);
  }
  /// The core once the queued releases are freed: what every reply reads.
  detail::allocation_core& fresh() {
    drain();
    return core_;
  }

  allocator_config config_;
  std::shared_ptr<backend> backend_;
  std::shared_ptr<detail::control_block> control_;
  /// Before its users; run out by the destructor's body before any member goes, in any order.
  worker_lanes lanes_{[b = backend_] { b->prepare_thread(); }};
  detail::off_loop_jobs jobs_{lanes_, backend_};
  detail::allocation_core core_;
  detail::release_ticker ticker_{*control_, core_};
  detail::residency_core residency_{config_, backend_, core_};
  /// Shared with callers, who may hold it past this incarnation (it then refuses every call).
  std::shared_ptr<detail::caller_side> calls_ =
      std::make_shared<detail::caller_side>(core_, residency_, lanes_, *control_, backend_);
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
