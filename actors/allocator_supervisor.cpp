#include <uma/actors/allocator_supervisor.hpp>

#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <uma/actors/allocator_settings.hpp>
#include <uma/actors/detail/generation_log.hpp>
#include <uma/actors/detail/residency_core.hpp>
#include <uma/actors/detail/restart_observers.hpp>
#include <uma/actors/detail/waiting_requests.hpp>
#include <uma/actors/managed_allocator.hpp>
#include <uma/messages/error_category.hpp>

namespace uma {

namespace {

/// The supervisor's own interface: the public one plus its restart timer, which names the
/// generation whose end it waits to replace (a timer that outlived its restart does nothing).
using supervisor_impl =
    allocator_supervisor_actor::extend<caf::reacts_to<respawn_atom, std::uint64_t>>;

class allocator_supervisor final : public supervisor_impl::base {
 public:
  allocator_supervisor(caf::actor_config& cfg, supervisor_config config)
      : supervisor_impl::base(cfg), config_(std::move(config)) {
    if (!config_.decider)
      config_.decider = default_decider;
    if (auto& s = config_.allocator.supervision; !s.history)  // one history spans restarts
      s.history = std::make_shared<event_history>(s.event_history);
    set_down_handler([this](caf::down_msg& dm) { on_down(dm); });
    set_exit_handler([this](caf::exit_msg& em) { on_exit_request(em); });
  }

  behavior_type make_behavior() override {
    spawn_child();
    // The allocator's whole interface is forwarded by one generic handler per signature
    // (forward_all); only what the supervisor itself answers is written out here.
    return forward_all(
        managed_allocator_actor::signatures{},
        [this](supervision_atom) -> supervision_stats { return current_stats(); },
        [this](restart_atom) -> caf::result<std::uint64_t> { return restart_on_request(); },
        [this](subscribe_atom, restart_observer_actor& o) -> caf::result<std::uint64_t> {
          return subscribe(o);
        },
        [this](unsubscribe_atom, restart_observer_actor& o) -> bool { return unsubscribe(o); },
        [this](respawn_atom, std::uint64_t ended) {
          if (state_ == supervisor_state::restarting && !child_ && ended == generation_)
            spawn_child();
        });
  }

  void on_exit() override {
    // on_exit also runs from on_destroy (no handle left), where the execution unit is stale:
    // every send from here goes through the scheduler's shared queue.
    context(nullptr);
    if (child_) {
      // Demonitor first: the incarnation's down message would otherwise schedule this actor
      // while it is being destroyed (when the last handle went away without a stop).
      // Anonymous: the receiver unlinks from an exit message's sender, which may be this
      // half-destroyed actor.
      demonitor(child_.address());
      caf::anon_send_exit(child_, caf::exit_reason::user_shutdown);
      child_ = nullptr;
    }
    state_ = supervisor_state::stopped;
    const auto stopped =
        make_caf_error(errc::allocator_stopped, "the allocator supervisor stopped");
    // Stashed requests and restart waiters, then those forwarded to the incarnation and not
    // answered yet: their replies would come to this actor, which is gone (CAF 0.17 does not
    // break a dropped promise).
    waiting_.fail_all(stopped);
    announce_stop(exit_reason_);
    supervisor_impl::base::on_exit();
  }

 private:
  // -- forwarding --------------------------------------------------------------------------------

  /// The behavior: a forwarding handler for each signature of `Sigs`, then `own` handlers.
  template <class... Sigs, class... Own>
  behavior_type forward_all(caf::detail::type_list<Sigs...>, Own... own) {
    return {forwarder(std::type_identity<Sigs>{})..., std::move(own)...};
  }

  /// The handler that forwards one request signature to the current incarnation.
  template <class... In, class Out>
  auto forwarder(
      std::type_identity<caf::typed_mpi<caf::detail::type_list<In...>, caf::output_tuple<Out>>>) {
    if constexpr (std::is_void_v<Out>) {
      // A notification (release): only the incarnation it concerns can act on it.
      return [this](In... xs) {
        if (child_)
          send(child_, std::move(xs)...);
      };
    } else {
      return [this](In&... xs) -> caf::result<Out> { return serve<Out>(std::move(xs)...); };
    }
  }

  /// A request the supervisor only forwards.
  template <class R, class... Ts>
  caf::result<R> serve(Ts... xs) {
    return forward<R>(std::move(xs)...);
  }

  // -- settings: the supervisor's value first, then the incarnation (allocator_settings.hpp) -----

  /// A quota set through the supervisor survives restarts: later incarnations start with it.
  /// Whether a quota is valid depends on the bytes the incarnation holds (never below them), so
  /// the supervisor's value takes it once the incarnation applied it; a refused one changes
  /// neither.
  template <class R>
  caf::result<R> serve(quota_atom, std::uint64_t bytes) {
    return forward_then<R>([this, bytes] { settings_.set_quota(bytes); }, quota_atom_v, bytes);
  }

  /// So does a device budget; one the backend would refuse changes nothing.
  template <class R>
  caf::result<R> serve(budget_atom, int device, std::uint64_t bytes) {
    return change_then_forward<R>([&] { settings_.set_budget(device, bytes, devices_); },
                                  budget_atom_v, device, bytes);
  }

  /// So does a tenant budget (0 removes it).
  template <class R>
  caf::result<R> serve(tenant_budget_atom, std::string tenant, int device, std::uint64_t bytes) {
    return change_then_forward<R>(
        [&] { settings_.set_tenant_budget(tenant, device, bytes, devices_); }, tenant_budget_atom_v,
        tenant, device, bytes);
  }

  /// Applies `change` to the supervisor's settings, then forwards `xs`; a change refused (it
  /// throws before changing anything) is answered with its error and never forwarded.
  template <class R, class F, class... Ts>
  caf::result<R> change_then_forward(F change, Ts... xs) {
    try {
      if (state_ != supervisor_state::stopped)  // stopped: forward says so
        change();
    } catch (const error& e) {
      return make_caf_error(e);
    }
    return forward<R>(std::move(xs)...);
  }

  template <class R, class... Ts>
  caf::result<R> forward(Ts... xs) {
    return forward_then<R>({}, std::move(xs)...);
  }

  /// Forwards `xs` to the current incarnation (or the next one), running `applied` once it
  /// answered with success.
  template <class R, class... Ts>
  caf::result<R> forward_then(std::function<void()> applied, Ts... xs) {
    if (state_ == supervisor_state::stopped)
      return stopped_error();
    auto rp = make_response_promise<R>();
    if (state_ == supervisor_state::running) {
      forward_now<R>(rp, std::move(applied), std::move(xs)...);
    } else {
      // Between incarnations: the request waits for the next one.
      waiting_.stash(
          [this, rp, applied, xs...]() mutable {
            forward_now<R>(rp, std::move(applied), std::move(xs)...);
          },
          [rp](const caf::error& err) mutable { rp.deliver(err); });
    }
    return rp;
  }

  template <class R, class... Ts>
  void forward_now(caf::typed_response_promise<R> rp, std::function<void()> applied, Ts... xs) {
    const auto gen = generation_;
    const auto id = waiting_.forwarded([rp](const caf::error& err) mutable { rp.deliver(err); });
    request(child_, caf::infinite, std::move(xs)...)
        .then(
            [this, rp, applied, id](R& r) mutable {
              waiting_.answered(id);
              if (applied)
                applied();
              rp.deliver(std::move(r));
            },
            [this, rp, gen, id](caf::error& err) mutable {
              waiting_.answered(id);
              if (err.category() == error_category) {
                rp.deliver(std::move(err));
                return;
              }
              // The incarnation went away under the request: say so, never a bare CAF error.
              rp.deliver(make_caf_error(errc::allocator_stopped,
                                        "allocator generation " + std::to_string(gen) +
                                            " went down while serving the request (" +
                                            system().render(err) + ")"));
            });
  }

  [[nodiscard]] caf::error stopped_error() const {
    return make_caf_error(errc::allocator_stopped,
                          "the allocator was stopped by its supervisor after generation " +
                              std::to_string(generation_) + " ended: " + last_reason_);
  }

  // -- explicit restarts and observers -----------------------------------------------------------

  caf::result<std::uint64_t> restart_on_request() {
    if (state_ == supervisor_state::stopped)
      return stopped_error();
    if (state_ == supervisor_state::restarting && !child_) {
      // A failure's backoff is pending: its restart happens now instead of after the delay.
      spawn_child();
      if (state_ != supervisor_state::running)
        return stopped_error();  // it could not start: the supervisor escalated
      return generation_;
    }
    auto rp = make_response_promise<std::uint64_t>();
    waiting_.await_restart([rp](std::uint64_t gen) mutable { rp.deliver(gen); },
                           [rp](const caf::error& err) mutable { rp.deliver(err); });
    if (state_ == supervisor_state::running) {
      // The incarnation stops like any other (post_stop frees, its refs go inert); its down
      // message starts the next one. Requests arriving meanwhile wait for that one.
      state_ = supervisor_state::restarting;
      restart_requested_ = true;
      send_exit(child_, caf::exit_reason::user_shutdown);
    }
    return rp;
  }

  caf::result<std::uint64_t> subscribe(const restart_observer_actor& o) {
    if (!o)
      return make_caf_error(errc::invalid_argument, "subscribe: the observer is an invalid handle");
    if (state_ == supervisor_state::stopped)
      return stopped_error();
    observers_.subscribe(o);
    return generation_;
  }

  bool unsubscribe(const restart_observer_actor& o) { return observers_.unsubscribe(o); }

  /// Observers hear once that no incarnation will follow; then they are forgotten.
  void announce_stop(const caf::error& reason) {
    observers_.announce_last(restart_event{generation_, 0, restart_cause::stopped, reason});
  }

  // -- incarnations ------------------------------------------------------------------------------

  void spawn_child() {
    auto cfg = config_.allocator;
    settings_.apply_to(cfg);  // the settings in force, set through this supervisor or not
    cfg.supervision.generation = ++generation_;
    cfg.supervision.on_stop = [log = log_, gen = generation_, user = cfg.supervision.on_stop](
                                  const allocator_stats& s, const stop_report& r) {
      log->stopped(gen, s, r);
      if (user)
        user(s, r);
    };
    try {
      // The supervisor makes the backend, so that it knows the devices its settings are checked
      // against.
      cfg.backend.instance = cfg.backend.resolve();
      devices_ = detail::residency_core::devices_of(*cfg.backend.instance);
      child_ = spawn_allocator(system(), std::move(cfg));
    } catch (const error& e) {
      // No backend (e.g. the device went away): nothing to supervise.
      escalate(make_caf_error(e),
               "could not start allocator generation " + std::to_string(generation_));
      return;
    }
    log_->started(generation_);
    monitor(child_);
    state_ = supervisor_state::running;
    if (auto ev = std::exchange(pending_event_, std::nullopt)) {
      ev->generation_after = generation_;
      observers_.notify(*ev);
    }
    waiting_.incarnation_started(generation_);  // stashed requests in arrival order, restarts
  }

  void on_down(const caf::down_msg& dm) {
    if (child_ && dm.source == child_.address()) {
      on_child_down(dm);
      return;
    }
    observers_.forget(dm.source);
  }

  void on_child_down(const caf::down_msg& dm) {
    child_ = nullptr;
    const bool requested = std::exchange(restart_requested_, false);
    const bool asked_for = requested && dm.reason == caf::exit_reason::user_shutdown;
    last_reason_ =
        asked_for ? "restart requested" : (dm.reason ? system().render(dm.reason) : "normal exit");
    log_->ended(generation_, last_reason_);
    if (stopping_) {
      exit_reason_ = stop_reason_;
      quit(stop_reason_);
      return;
    }
    if (requested) {
      // Replaced on purpose: no backoff, not counted against the restart intensity. (An
      // incarnation that failed before the request reached it is replaced all the same.)
      ++requested_restarts_;
      pending_event_ = restart_event{generation_, 0, restart_cause::requested,
                                     asked_for ? caf::error{} : dm.reason};
      spawn_child();
      return;
    }
    decide(dm.reason);
  }

  void decide(const caf::error& reason) {
    switch (config_.decider(reason)) {
      case supervisor_decision::resume:
        // A dead incarnation cannot be resumed: it is replaced at once, without counting
        // against the restart intensity (its failure was not the allocator's fault).
        ++resumes_;
        schedule_restart(std::chrono::milliseconds(0), reason);
        return;
      case supervisor_decision::restart:
        restart_after_failure(reason);
        return;
      case supervisor_decision::stop:
        state_ = supervisor_state::stopped;
        waiting_.fail_waiting(stopped_error());
        announce_stop(reason);
        return;
      case supervisor_decision::escalate:
        escalate(reason, "allocator generation " + std::to_string(generation_) + " failed");
        return;
    }
  }

  void restart_after_failure(const caf::error& reason) {
    if (const auto delay = window_.admit(clock().now()))
      schedule_restart(*delay, reason);
    else
      escalate(reason, window_.exceeded());
  }

  void schedule_restart(std::chrono::milliseconds delay, const caf::error& reason) {
    ++restarts_;
    state_ = supervisor_state::restarting;
    pending_event_ = restart_event{generation_, 0, restart_cause::failure, reason};
    backoffs_ms_.push_back(static_cast<std::uint64_t>(delay.count()));
    if (delay.count() == 0)
      spawn_child();
    else
      delayed_send(caf::actor_cast<supervisor_impl>(this), delay, respawn_atom_v, generation_);
  }

  void escalate(const caf::error& reason, const std::string& what) {
    state_ = supervisor_state::stopped;
    auto err = make_caf_error(errc::unrecoverable,
                              "allocator supervisor escalates: " + what +
                                  "; last failure: " + (reason ? system().render(reason) : "none"));
    waiting_.fail_waiting(err);
    exit_reason_ = err;
    quit(std::move(err));
  }

  void on_exit_request(caf::exit_msg& em) {
    if (child_) {
      stopping_ = true;
      stop_reason_ = em.reason;
      send_exit(child_, em.reason);  // quit once its post_stop has run (down message)
    } else {
      exit_reason_ = em.reason;
      quit(em.reason);
    }
  }

  supervision_stats current_stats() {
    supervision_stats s;
    s.current_generation = generation_;
    s.restarts = restarts_;
    s.resumes = resumes_;
    s.requested_restarts = requested_restarts_;
    s.state = state_;
    s.last_exit_reason = last_reason_;
    s.backoffs_ms = backoffs_ms_;
    s.observers = observers_.size();
    s.generations = log_->records();
    return s;
  }

  supervisor_config config_;
  /// The quota and budgets each incarnation starts with (seeded from config_.allocator).
  allocator_settings settings_ = allocator_settings::of(config_.allocator);
  /// The memory of each device of the current incarnation's backend: what settings_ is checked
  /// against.
  std::vector<std::size_t> devices_;
  managed_allocator_actor child_;
  std::uint64_t generation_ = 0;
  std::uint64_t restarts_ = 0;
  std::uint64_t resumes_ = 0;
  std::uint64_t requested_restarts_ = 0;
  supervisor_state state_ = supervisor_state::restarting;  // until generation 1 runs
  std::string last_reason_;
  std::vector<std::uint64_t> backoffs_ms_;
  restart_window window_{config_};
  /// Requests stashed between incarnations, forwarded and not answered, and explicit restarts:
  /// each answered exactly once (failed with allocator_stopped at exit).
  detail::waiting_requests waiting_;
  detail::restart_observers observers_{*this};
  std::optional<restart_event> pending_event_;  ///< told to observers once the next one runs
  bool restart_requested_ = false;
  bool stopping_ = false;
  caf::error stop_reason_;
  caf::error exit_reason_;  ///< what observers hear when the supervisor itself goes
  /// Each incarnation's record; shared with their stop callbacks.
  std::shared_ptr<detail::generation_log> log_ = std::make_shared<detail::generation_log>();
};

}  // namespace

allocator_supervisor_actor spawn_supervisor(caf::actor_system& sys, supervisor_config config) {
  return sys.spawn<allocator_supervisor>(std::move(config));
}

supervision_stats query_supervision(caf::actor_system& sys,
                                    const allocator_supervisor_actor& supervisor) {
  caf::scoped_actor self{sys};
  supervision_stats out;
  caf::error err;
  self->request(supervisor, std::chrono::seconds(30), supervision_atom_v)
      .receive([&](supervision_stats& s) { out = std::move(s); },
               [&](caf::error& e) { err = std::move(e); });
  if (err)
    throw to_uma_error(err);
  return out;
}

}  // namespace uma
