#include <uma/actors/allocator_supervisor.hpp>

#include <deque>
#include <map>
#include <mutex>

#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <uma/actors/managed_allocator.hpp>
#include <uma/messages/error_category.hpp>

namespace uma {

namespace {

/// The supervisor's own interface: the public one plus its restart timer.
using supervisor_impl = allocator_supervisor_actor::extend<caf::reacts_to<respawn_atom>>;

/// Final records written by incarnations from their post_stop (their own thread).
struct generation_log {
  std::mutex mutex;
  std::map<std::uint64_t, generation_record> records;
};

class allocator_supervisor final : public supervisor_impl::base {
 public:
  allocator_supervisor(caf::actor_config& cfg, supervisor_config config)
      : supervisor_impl::base(cfg), config_(std::move(config)) {
    if (!config_.decider)
      config_.decider = default_decider;
    set_down_handler([this](caf::down_msg& dm) { on_child_down(dm); });
    set_exit_handler([this](caf::exit_msg& em) { on_exit_request(em); });
  }

  behavior_type make_behavior() override {
    spawn_child();
    return {
        [this](allocate_atom a, allocate_request& r) -> caf::result<byte_ref> {
          return forward<byte_ref>(a, std::move(r));
        },
        [this](prefetch_atom a, prefetch_request& r) -> caf::result<op_result> {
          return forward<op_result>(a, std::move(r));
        },
        [this](discard_atom a, discard_request& r) -> caf::result<op_result> {
          return forward<op_result>(a, std::move(r));
        },
        [this](discard_prefetch_atom a, prefetch_request& r) -> caf::result<op_result> {
          return forward<op_result>(a, std::move(r));
        },
        [this](advise_atom a, advise_request& r) -> caf::result<op_result> {
          return forward<op_result>(a, std::move(r));
        },
        [this](attributes_atom a, byte_ref& ref) -> caf::result<range_attributes> {
          return forward<range_attributes>(a, std::move(ref));
        },
        [this](stats_atom a) -> caf::result<allocator_stats> {
          return forward<allocator_stats>(a);
        },
        [this](memory_kind_atom a, std::uintptr_t p) -> caf::result<memory_kind> {
          return forward<memory_kind>(a, p);
        },
        [this](can_access_atom a, location loc, byte_ref& ref) -> caf::result<bool> {
          return forward<bool>(a, loc, std::move(ref));
        },
        [this](regions_atom a) -> caf::result<std::vector<region_info>> {
          return forward<std::vector<region_info>>(a);
        },
        [this](flush_atom a) -> caf::result<allocator_stats> {
          return forward<allocator_stats>(a);
        },
        [this](trim_atom a) -> caf::result<std::uint64_t> { return forward<std::uint64_t>(a); },
        [this](lease_atom a, lease_request& r) -> caf::result<block_cache> {
          return forward<block_cache>(a, std::move(r));
        },
        [this](quota_atom a, std::uint64_t bytes) -> caf::result<std::uint64_t> {
          // A quota set survives restarts: later incarnations start with it.
          return forward_then<std::uint64_t>(
              [this, bytes](std::uint64_t quota) {
                if (bytes != 0)
                  config_.allocator.quota_bytes = quota;
              },
              a, bytes);
        },
        [this](release_atom a) {
          if (child_)
            send(child_, a);
        },
        [this](supervision_atom) -> supervision_stats { return current_stats(); },
        [this](respawn_atom) {
          if (state_ == "restarting")
            spawn_child();
        },
    };
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
    fail_stash(make_caf_error(errc::allocator_stopped, "the allocator supervisor stopped"));
    supervisor_impl::base::on_exit();
  }

 private:
  // -- forwarding --------------------------------------------------------------------------------

  template <class R, class... Ts>
  caf::typed_response_promise<R> forward(Ts... xs) {
    return forward_then<R>(std::function<void(R)>{}, std::move(xs)...);
  }

  /// forward, with `on_reply` called with a successful reply before it is delivered.
  template <class R, class... Ts>
  caf::typed_response_promise<R> forward_then(std::function<void(R)> on_reply, Ts... xs) {
    auto rp = make_response_promise<R>();
    if (child_) {
      forward_now<R>(rp, on_reply, std::move(xs)...);
    } else if (state_ == "restarting") {
      stash_.push_back({[this, rp, on_reply, xs...]() mutable {
                          forward_now<R>(rp, on_reply, std::move(xs)...);
                        },
                        [rp](caf::error err) mutable { rp.deliver(std::move(err)); }});
    } else {
      rp.deliver(make_caf_error(errc::allocator_stopped,
                                "the allocator was stopped by its supervisor after generation " +
                                    std::to_string(generation_) + " ended: " + last_reason_));
    }
    return rp;
  }

  template <class R, class... Ts>
  void forward_now(caf::typed_response_promise<R> rp, std::function<void(R)> on_reply, Ts... xs) {
    const auto gen = generation_;
    request(child_, caf::infinite, std::move(xs)...)
        .then(
            [rp, on_reply](R& r) mutable {
              if (on_reply)
                on_reply(r);
              rp.deliver(std::move(r));
            },
            [this, rp, gen](caf::error& err) mutable {
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

  void fail_stash(const caf::error& err) {
    auto stash = std::exchange(stash_, {});
    for (auto& s : stash)
      s.fail(err);
  }

  // -- incarnations ------------------------------------------------------------------------------

  void spawn_child() {
    auto cfg = config_.allocator;
    cfg.generation = ++generation_;
    cfg.on_stop = [log = log_, gen = generation_](const allocator_stats& s, const stop_report& r) {
      std::lock_guard lock(log->mutex);
      auto& rec = log->records[gen];
      rec.generation = gen;
      rec.final_stats = s;
      rec.regions_freed = r.regions_freed;
      rec.regions_leaked = r.regions_leaked;
    };
    try {
      child_ = spawn_allocator(system(), std::move(cfg));
    } catch (const error& e) {
      // No backend (e.g. the device went away): nothing to supervise.
      escalate(make_caf_error(e),
               "could not start allocator generation " + std::to_string(generation_));
      return;
    }
    {
      std::lock_guard lock(log_->mutex);
      log_->records[generation_] = generation_record{generation_, true, {}, 0, 0, {}};
    }
    monitor(child_);
    state_ = "running";
    auto stash = std::exchange(stash_, {});
    for (auto& s : stash)
      s.run();
  }

  void on_child_down(const caf::down_msg& dm) {
    if (!child_ || dm.source != child_.address())
      return;
    child_ = nullptr;
    last_reason_ = dm.reason ? system().render(dm.reason) : "normal exit";
    {
      std::lock_guard lock(log_->mutex);
      auto& rec = log_->records[generation_];
      rec.alive = false;
      rec.exit_reason = last_reason_;
    }
    if (stopping_) {
      quit(stop_reason_);
      return;
    }
    switch (config_.decider(dm.reason)) {
      case supervisor_decision::resume:
        // A dead incarnation cannot be resumed: it is replaced at once, without counting
        // against the restart intensity (its failure was not the allocator's fault).
        ++resumes_;
        schedule_restart(std::chrono::milliseconds(0));
        return;
      case supervisor_decision::restart:
        restart_after_failure(dm.reason);
        return;
      case supervisor_decision::stop:
        state_ = "stopped";
        fail_stash(make_caf_error(errc::allocator_stopped,
                                  "the allocator was stopped by its supervisor after generation " +
                                      std::to_string(generation_) + " ended: " + last_reason_));
        return;
      case supervisor_decision::escalate:
        escalate(dm.reason, "allocator generation " + std::to_string(generation_) + " failed");
        return;
    }
  }

  void restart_after_failure(const caf::error& reason) {
    const auto now = clock().now();
    while (!restart_times_.empty() && now - restart_times_.front() > config_.within)
      restart_times_.pop_front();
    if (restart_times_.size() >= config_.max_restarts) {
      escalate(reason, "restart intensity exceeded: " + std::to_string(restart_times_.size()) +
                           " restarts within " + std::to_string(config_.within.count()) + " ms");
      return;
    }
    restart_times_.push_back(now);
    auto delay = config_.backoff_initial;
    for (std::size_t k = 1; k < restart_times_.size() && delay < config_.backoff_max; ++k)
      delay *= 2;
    schedule_restart(std::min(delay, config_.backoff_max));
  }

  void schedule_restart(std::chrono::milliseconds delay) {
    ++restarts_;
    state_ = "restarting";
    backoffs_ms_.push_back(static_cast<std::uint64_t>(delay.count()));
    if (delay.count() == 0)
      spawn_child();
    else
      delayed_send(caf::actor_cast<supervisor_impl>(this), delay, respawn_atom_v);
  }

  void escalate(const caf::error& reason, const std::string& what) {
    state_ = "stopped";
    auto err = make_caf_error(errc::unrecoverable,
                              "allocator supervisor escalates: " + what +
                                  "; last failure: " + (reason ? system().render(reason) : "none"));
    fail_stash(err);
    quit(std::move(err));
  }

  void on_exit_request(caf::exit_msg& em) {
    if (child_) {
      stopping_ = true;
      stop_reason_ = em.reason;
      send_exit(child_, em.reason);  // quit once its post_stop has run (down message)
    } else {
      quit(em.reason);
    }
  }

  supervision_stats current_stats() {
    supervision_stats s;
    s.current_generation = generation_;
    s.restarts = restarts_;
    s.resumes = resumes_;
    s.state = state_;
    s.last_exit_reason = last_reason_;
    s.backoffs_ms = backoffs_ms_;
    std::lock_guard lock(log_->mutex);
    for (const auto& [gen, rec] : log_->records)
      s.generations.push_back(rec);
    return s;
  }

  struct stashed {
    std::function<void()> run;
    std::function<void(caf::error)> fail;
  };

  supervisor_config config_;
  managed_allocator_actor child_;
  std::uint64_t generation_ = 0;
  std::uint64_t restarts_ = 0;
  std::uint64_t resumes_ = 0;
  std::string state_ = "starting";
  std::string last_reason_;
  std::vector<std::uint64_t> backoffs_ms_;
  std::deque<caf::actor_clock::time_point> restart_times_;
  std::vector<stashed> stash_;
  bool stopping_ = false;
  caf::error stop_reason_;
  std::shared_ptr<generation_log> log_ = std::make_shared<generation_log>();
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
