#include <uma/actors/remote/remote_gateway.hpp>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <caf/typed_event_based_actor.hpp>

#include <uma/actors/remote/detail/remote_checks.hpp>
#include <uma/actors/remote/detail/remote_report.hpp>
#include <uma/actors/remote/detail/remote_sessions.hpp>
#include <uma/actors/remote/detail/tenant_totals.hpp>
#include <uma/messages/error_category.hpp>

namespace uma {

namespace {

using detail::lookup_failure;
using detail::refusal;
using session_map = std::map<std::uint64_t, detail::session>;
constexpr auto to_remote_op = [](const op_result& r) { return to_remote(r); };
constexpr auto identity = [](const auto& x) { return x; };
using count = std::uint64_t;
using snap = remote_snapshot;
using moves = residency_result;
using handles = std::vector<region_handle>;
using charv = std::vector<char>;
using page = remote_region_page;

caf::error to_caf(const refusal& r) {
  return make_caf_error(r.code, r.message);
}

class remote_gateway final : public remote_allocator_actor::base {
 public:
  remote_gateway(caf::actor_config& cfg, allocator_supervisor_actor supervisor,
                 gateway_config config)
      : remote_allocator_actor::base(cfg),
        supervisor_(std::move(supervisor)),
        config_(std::move(config)),
        ceiling_(config_.quota_ceiling) {
    set_down_handler([this](caf::down_msg& dm) { on_down(dm); });
  }

  /// Exit and link messages of remote actors are dropped here, before CAF's own handling: CAF
  /// 0.17 quits on an exit with reason `kill` whatever the exit handler says.
  void enqueue(caf::mailbox_element_ptr ptr, caf::execution_unit* eu) override {
    if (ptr)
      if (auto why = detail::refused_system_message(*ptr, node(), system())) {
        log(*why);
        return;
      }
    remote_allocator_actor::base::enqueue(std::move(ptr), eu);
  }

  behavior_type make_behavior() override {
    monitor(supervisor_);
    learn_ceiling();
    return {
        [this](open_session_atom, caf::actor& peer) -> caf::result<session_key> {
          return open_session(peer, "node " + caf::to_string(peer.node()));
        },
        [this](open_tenant_session_atom, caf::actor& peer, std::string& tenant)
            -> caf::result<session_key> { return open_session(peer, std::move(tenant), true); },
        [this](close_session_atom, const session_key& k) -> caf::result<std::uint64_t> {
          return close_session(k);
        },
        [this](allocate_atom, const session_key& k, remote_allocate_request& r)
            -> caf::result<region_handle> { return allocate(k, std::move(r)); },
        [this](release_atom, const session_key& k, region_handle h) -> caf::result<std::uint64_t> {
          return release(k, h);
        },
        [this](prefetch_atom, const session_key& k, remote_prefetch_request& r)
            -> caf::result<remote_op_result> { return prefetch(k, std::move(r)); },
        [this](discard_atom, const session_key& k, remote_discard_request& r)
            -> caf::result<remote_op_result> { return discard(k, std::move(r)); },
        [this](advise_atom, const session_key& k, remote_advise_request& r)
            -> caf::result<remote_op_result> { return advise(k, std::move(r)); },
        [this](will_access_atom, const session_key& k, remote_access_plan& r)
            -> caf::result<residency_result> { return plan(k, std::move(r)); },
        [this](done_with_atom a, const session_key& k, handles& hs) -> caf::result<count> {
          return on_refs<count>(a, k, hs, "done_with");
        },
        [this](dead_atom a, const session_key& k, handles& hs) -> caf::result<moves> {
          return on_refs<moves>(a, k, hs, "dead");
        },
        [this](attributes_atom, const session_key& k,
               region_handle h) -> caf::result<remote_attributes> { return attributes(k, h); },
        [this](stats_atom) -> caf::result<remote_stats> { return stats(); },
        [this](leased_regions_atom, const session_key& k, region_page p) -> caf::result<page> {
          if (authorize(k) == nullptr)
            return lookup_failure{"regions", k.id, true}.to_error(nullptr);
          return regions(k.id, p);
        },
        [this](regions_atom, const operator_key& k, region_page p) -> caf::result<page> {
          if (!detail::operator_key_matches(config_.operator_secret, k))
            return detail::operator_refusal("regions");
          return regions(0, p);
        },
        [this](snapshot_atom, const operator_key& k) -> caf::result<snap> { return snapshot(k); },
        [this](quota_atom, count bytes) -> caf::result<count> { return read_quota(bytes); },
        [this](set_quota_atom, const operator_key& k,
               std::uint64_t bytes) -> caf::result<std::uint64_t> { return set_quota(k, bytes); },
        [this](restart_atom, const operator_key& k) -> caf::result<count> { return restart(k); },
        [this](export_ipc_atom, const session_key& k, region_handle h) -> caf::result<charv> {
          if (authorize(k) == nullptr)
            return lookup_failure{"export_ipc", k.id, true}.to_error(nullptr);
          return detail::ipc_refusal(h);
        },
    };
  }

  void on_exit() override {
    // Dropping the refs releases the regions: the allocator is woken by its own waker.
    sessions_.clear();
    remote_allocator_actor::base::on_exit();
  }

 private:
  /// Without a ceiling given, the quota in force at start is the ceiling.
  void learn_ceiling() {
    if (ceiling_ == 0)
      request(supervisor_, caf::infinite, quota_atom_v, std::uint64_t{0})
          .then([this](std::uint64_t q) { ceiling_ = ceiling_ == 0 ? q : ceiling_; },
                [](caf::error&) {});
  }

  // -- authority -------------------------------------------------------------------------------

  /// The session `k` names if its secret matches and the request comes from its node; counts
  /// the request as activity. Null otherwise.
  detail::session* authorize(const session_key& k) {
    expire_idle();
    auto it = sessions_.find(k.id);
    const auto& sender = current_sender();
    if (it == sessions_.end() || !it->second.has_secret(k) || sender == nullptr ||
        sender->node() != it->second.node)
      return nullptr;
    it->second.last_used = std::chrono::steady_clock::now();
    return &it->second;
  }

  // -- sessions ----------------------------------------------------------------------------------

  /// A session of `tenant`; a `named` one (the local wire's identity) from a local sender only.
  caf::result<session_key> open_session(const caf::actor& peer, std::string tenant,
                                        bool named = false) {
    expire_idle();
    const auto& sender = current_sender();
    if (named && (sender == nullptr || sender->node() != node() || tenant.empty()))
      return make_caf_error(errc::invalid_argument, "open_session: only the local wire names one");
    if (auto why = detail::refuse_peer(peer, sender, address(), supervisor_.address()))
      return make_caf_error(errc::invalid_argument, "open_session: " + *why);
    const auto of_tenant = detail::sessions_of(sessions_, tenant);
    if (of_tenant >= config_.max_sessions_per_tenant)
      return make_caf_error(errc::quota_exceeded, "open_session: " + tenant + " has " +
                                                      std::to_string(of_tenant) +
                                                      " sessions open, the cap per tenant");
    session_key key{++next_session_};
    detail::random_secret(key.secret_hi, key.secret_lo);
    log("session " + std::to_string(key.id) + " opened by " + tenant);
    auto totals = tenants_.of(tenant);
    sessions_.try_emplace(key.id, peer, key, std::move(tenant), std::move(totals));
    monitor(peer);  // already down: the down message comes at once and ends the session
    return key;
  }

  caf::result<std::uint64_t> close_session(const session_key& k) {
    if (authorize(k) == nullptr)
      return lookup_failure{"close_session", k.id, true}.to_error(nullptr);
    return end_session(sessions_.find(k.id), "closed by its peer").leases;
  }

  /// Ends a session: its leases are released, its peer no longer monitored.
  detail::leases_released end_session(session_map::iterator it, const std::string& why) {
    demonitor(it->second.peer);
    const auto gone = it->second.leases.release_all();  // the allocator frees what nobody holds
    log("session " + std::to_string(it->first) + " " + why + "; released " +
        std::to_string(gone.leases) + " lease(s), " + std::to_string(gone.bytes) + " bytes");
    const auto tenant = std::move(it->second.tenant);
    sessions_.erase(it);
    tenants_.forget_unused(tenant);
    return gone;
  }

  /// Ends every session idle for longer than the idle timeout (none with requests in flight),
  /// and its peer with it: the session's actor (on the wire, the holder of its stream, whose exit
  /// ends the stream, so that the connection goes idle and gRPC closes it, freeing its slot).
  void expire_idle() {
    for (const auto sid : detail::idle_sessions(sessions_, config_.idle_timeout)) {
      auto it = sessions_.find(sid);
      const auto peer = it->second.peer;
      end_session(
          it, "ended: idle for more than " + std::to_string(config_.idle_timeout.count()) + " ms");
      caf::anon_send_exit(peer, caf::exit_reason::user_shutdown);
    }
  }

  void on_down(const caf::down_msg& dm) {
    if (dm.source == supervisor_.address()) {
      log("the allocator supervisor went down (" +
          (dm.reason ? system().render(dm.reason) : std::string("normal exit")) +
          "); the gateway stops");
      quit(dm.reason);
      return;
    }
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      auto next = std::next(it);
      if (it->second.peer == dm.source) {
        ++sessions_lost_;
        end_session(it, "ended: its peer went down (" +
                            (dm.reason ? system().render(dm.reason) : "normal exit") + ")");
      }
      it = next;
    }
  }

  // -- leases (each session's lease book: actors/remote/detail/lease_book) ---------------------

  caf::result<region_handle> allocate(const session_key& k, remote_allocate_request r) {
    auto* s = authorize(k);
    if (s == nullptr)
      return lookup_failure{"allocate", k.id, true}.to_error(nullptr);
    if (auto busy = too_busy(*s, "allocate"))
      return *busy;
    if (auto bad = detail::admit(*s, r, config_, ceiling_))
      return to_caf(*bad);
    const std::uint64_t charge = *detail::admission_charge(r);  // checked by admit
    detail::lease_origin origin{r.label, r.attach};
    s->leases.reserve(charge);
    ++s->in_flight;
    const auto sid = k.id;
    auto rp = make_response_promise<region_handle>();
    request(supervisor_, caf::infinite, allocate_atom_v,
            allocate_request{r.bytes, 1, r.alignment, r.attach, {}, std::move(r.label)})
        .then(
            [this, rp, sid, charge, origin = std::move(origin)](byte_ref& ref) mutable {
              auto* s = settle(sid, charge);
              if (s == nullptr) {
                // The session ended while the allocator worked: the ref drops here, and with
                // it the region.
                rp.deliver(lookup_failure{"allocate", sid, true}.to_error(nullptr));
                return;
              }
              // What the region holds (its padding and rounding included), and its label.
              const auto held = detail::record_of(ref)->backend_bytes + origin.label.size();
              rp.deliver(s->leases.add(std::move(ref), held, std::move(origin)));
            },
            [this, rp, sid, charge](caf::error& err) mutable {
              settle(sid, charge);
              rp.deliver(relay(std::move(err)));
            });
    return rp;
  }

  /// Ends the bookkeeping of one forwarded request of session `sid` (if it is still open).
  detail::session* settle(std::uint64_t sid, std::uint64_t charge = 0) {
    auto it = sessions_.find(sid);
    if (it == sessions_.end())
      return nullptr;
    it->second.leases.settle(charge);
    --it->second.in_flight;
    it->second.last_used = std::chrono::steady_clock::now();
    return &it->second;
  }

  std::optional<caf::error> too_busy(const detail::session& s, const char* op) const {
    if (s.in_flight < config_.max_in_flight_per_session)
      return std::nullopt;
    return make_caf_error(errc::quota_exceeded,
                          std::string(op) + ": the session has " + std::to_string(s.in_flight) +
                              " requests in flight, the cap; wait for their replies");
  }

  caf::result<std::uint64_t> release(const session_key& k, region_handle h) {
    auto* s = authorize(k);
    if (s == nullptr)
      return lookup_failure{"release", k.id, true}.to_error(nullptr);
    if (const auto bytes = s->leases.release(h))
      return *bytes;
    std::vector<byte_ref> none;
    return fail<std::uint64_t>(*detail::resolve(*s, k.id, {h}, "release", none));
  }

  // -- requests on leased regions ----------------------------------------------------------------

  caf::result<remote_op_result> prefetch(const session_key& k, remote_prefetch_request r) {
    if (auto bad = detail::check_completion("prefetch", r.reply_when))
      return to_caf(*bad);
    if (auto bad = detail::check_locations("prefetch", r.locations))
      return to_caf(*bad);
    return with_refs<remote_op_result>(k, r.regions, "prefetch", [&](auto refs) {
      return ask<remote_op_result, op_result>(
          k.id, to_remote_op, prefetch_atom_v,
          prefetch_request{std::move(refs), std::move(r.locations), {}, r.reply_when});
    });
  }

  caf::result<remote_op_result> discard(const session_key& k, remote_discard_request r) {
    if (auto bad = detail::check_completion("discard", r.reply_when))
      return to_caf(*bad);
    return with_refs<remote_op_result>(k, r.regions, "discard", [&](auto refs) {
      return ask<remote_op_result, op_result>(k.id, to_remote_op, discard_atom_v,
                                              discard_request{std::move(refs), {}, r.reply_when});
    });
  }

  caf::result<remote_op_result> advise(const session_key& k, remote_advise_request r) {
    if (auto bad = detail::check_advise(r))
      return to_caf(*bad);
    return with_refs<remote_op_result>(k, r.regions, "advise", [&](auto refs) {
      return ask<remote_op_result, op_result>(k.id, to_remote_op, advise_atom_v,
                                              advise_request{std::move(refs), r.what, r.where});
    });
  }

  /// `atom` with the refs of `handles`, answered as the allocator answers.
  template <class R, class Atom>
  caf::result<R> on_refs(Atom atom, const session_key& k, const handles& hs, const char* op) {
    return with_refs<R>(k, hs, op,
                        [&](auto refs) { return ask<R, R>(k.id, identity, atom, refs); });
  }

  /// A plan counts for its session's tenant, whose device budget (if any) is sent first.
  caf::result<residency_result> plan(const session_key& k, remote_access_plan r) {
    if (auto bad = detail::check_completion("will_access", r.reply_when))
      return to_caf(*bad);
    return with_refs<residency_result>(k, r.regions, "will_access", [&](auto refs) {
      auto tenant = detail::tenant_of(sessions_.at(k.id));
      if (config_.tenant_device_budget_bytes != 0 && !budgeted_.contains({tenant, r.device}))
        request(supervisor_, caf::infinite, tenant_budget_atom_v, tenant, r.device,
                config_.tenant_device_budget_bytes)
            .then([this, tenant, d = r.device](std::uint64_t) { budgeted_.emplace(tenant, d); },
                  [](caf::error&) {});  // a bad device: the plan behind it says so
      return ask<residency_result, residency_result>(
          k.id, identity, will_access_atom_v,
          access_plan_request{
              std::move(refs), r.device, r.mode, r.policy, {}, r.reply_when, std::move(tenant)});
    });
  }

  caf::result<remote_attributes> attributes(const session_key& k, region_handle h) {
    return with_refs<remote_attributes>(k, {h}, "attributes", [&](auto refs) {
      return ask<remote_attributes, range_attributes>(
          k.id, [](const range_attributes& a) { return to_remote(a); }, attributes_atom_v,
          std::move(refs.front()));
    });
  }

  /// Runs `then(refs)` when every handle resolves; otherwise replies the lookup failure.
  template <class R, class Then>
  caf::result<R> with_refs(const session_key& k, const std::vector<region_handle>& handles,
                           const char* op, Then then) {
    auto* s = authorize(k);
    if (s == nullptr)
      return lookup_failure{op, k.id, true}.to_error(nullptr);
    if (handles.empty())
      return make_caf_error(errc::invalid_argument, std::string(op) + ": no regions given");
    if (auto busy = too_busy(*s, op))
      return *busy;
    std::vector<byte_ref> refs;
    if (auto failure = detail::resolve(*s, k.id, handles, op, refs))
      return fail<R>(std::move(*failure));
    ++s->in_flight;
    return then(std::move(refs));
  }

  /// Replies `failure` once the supervisor said which generation runs now.
  template <class R>
  caf::result<R> fail(lookup_failure failure) {
    if (failure.no_session)
      return failure.to_error(nullptr);
    auto rp = make_response_promise<R>();
    request(supervisor_, std::chrono::seconds(10), supervision_atom_v)
        .then([rp, failure](supervision_stats& sv) mutable { rp.deliver(failure.to_error(&sv)); },
              [rp, failure](caf::error&) mutable { rp.deliver(failure.to_error(nullptr)); });
    return rp;
  }

  // -- forwarding to the supervisor ------------------------------------------------------------

  /// Sends `xs` to the supervisor and replies its answer converted to the wire type; settles
  /// one request in flight of session `sid` (0: none) when the answer comes.
  template <class R, class Local, class Convert, class... Ts>
  caf::typed_response_promise<R> ask(std::uint64_t sid, Convert convert, Ts... xs) {
    auto rp = make_response_promise<R>();
    request(supervisor_, caf::infinite, std::move(xs)...)
        .then(
            [this, rp, sid, convert](Local& x) mutable {
              settle(sid);
              rp.deliver(convert(x));
            },
            [this, rp, sid](caf::error& err) mutable {
              settle(sid);
              rp.deliver(relay(std::move(err)));
            });
    return rp;
  }

  /// Anyone reads the quota (0); setting it needs the operator key.
  caf::result<std::uint64_t> read_quota(std::uint64_t bytes) {
    if (bytes != 0)
      return detail::operator_refusal("quota: setting the quota to " + std::to_string(bytes) +
                                      " bytes");
    return ask<std::uint64_t, std::uint64_t>(0, identity, quota_atom_v, bytes);
  }

  /// The operator sets the quota, never above the ceiling (learnt from the supervisor first if
  /// the gateway was not told it).
  caf::result<std::uint64_t> set_quota(const operator_key& k, std::uint64_t bytes) {
    if (!detail::operator_key_matches(config_.operator_secret, k))
      return detail::operator_refusal("quota");
    if (bytes == 0 || (ceiling_ != 0 && bytes <= ceiling_))
      return ask<std::uint64_t, std::uint64_t>(0, identity, quota_atom_v, bytes);
    if (ceiling_ != 0)
      return make_caf_error(errc::invalid_argument,
                            "quota: " + std::to_string(bytes) + " bytes is above the ceiling of " +
                                std::to_string(ceiling_) +
                                " bytes the serving node was started with; no request lifts it");
    auto rp = make_response_promise<std::uint64_t>();
    request(supervisor_, caf::infinite, quota_atom_v, std::uint64_t{0})
        .then(
            [this, rp, k, bytes](std::uint64_t q) mutable {
              ceiling_ = ceiling_ == 0 ? q : ceiling_;
              rp.delegate(caf::actor_cast<remote_allocator_actor>(this), set_quota_atom_v, k,
                          bytes);
            },
            [this, rp](caf::error& err) mutable { rp.deliver(relay(std::move(err))); });
    return rp;
  }

  caf::error relay(caf::error err) { return detail::relay_error(system(), std::move(err)); }

  caf::result<remote_stats> stats() {
    expire_idle();
    auto rp = make_response_promise<remote_stats>();
    detail::gather_stats(
        this, supervisor_, rp,
        [this](remote_stats& out) {
          detail::count_leases(out, sessions_, tenants_.all());
          out.sessions_lost = sessions_lost_;
        },
        [this](caf::error err) { return relay(std::move(err)); });
    return rp;
  }

  /// One page of the supervisor's region report (only session `only`'s rows unless it is 0),
  /// with attributes read for the page's leased rows.
  caf::result<page> regions(std::uint64_t only, region_page p) {
    auto rp = make_response_promise<page>();
    detail::gather_regions(this, supervisor_, rp, sessions_, only, p, config_.max_region_page,
                           [this](caf::error err) { return relay(std::move(err)); });
    return rp;
  }

  caf::result<std::uint64_t> restart(const operator_key& k) {
    if (!detail::operator_key_matches(config_.operator_secret, k))
      return detail::operator_refusal("restart");
    return ask<std::uint64_t, std::uint64_t>(0, identity, restart_atom_v);
  }

  /// The supervisor's snapshot, each leased region with its session (read when the snapshot
  /// arrives, so a lease taken meanwhile shows).
  caf::result<remote_snapshot> snapshot(const operator_key& k) {
    if (!detail::operator_key_matches(config_.operator_secret, k))
      return detail::operator_refusal("snapshot");
    return ask<remote_snapshot, allocator_snapshot>(
        0, [this](const allocator_snapshot& s) { return detail::with_sessions(s, sessions_); },
        snapshot_atom_v);
  }

  void log(const std::string& line) const {
    if (config_.log)
      config_.log(line);
  }

  allocator_supervisor_actor supervisor_;
  gateway_config config_;
  std::uint64_t ceiling_ = 0;
  session_map sessions_;
  detail::tenant_totals tenants_;  // each tenant's leases, counted as they come and go
  std::uint64_t next_session_ = 0;
  std::uint64_t sessions_lost_ = 0;
  std::set<std::pair<std::string, int>> budgeted_;  // (tenant, device) given their budget
};

}  // namespace

remote_allocator_actor spawn_remote_gateway(caf::actor_system& sys,
                                            allocator_supervisor_actor supervisor,
                                            gateway_config config) {
  return sys.spawn<remote_gateway>(std::move(supervisor), std::move(config));
}

}  // namespace uma
