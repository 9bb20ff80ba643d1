#include <uma/actors/remote_gateway.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <map>
#include <memory>
#include <optional>

#include <caf/io/middleman.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <uma/messages/error_category.hpp>

namespace uma {

namespace {

/// One remote peer's session: the actor the gateway monitors for it and its leases. Holding a
/// lease's ref is what keeps the region allocated.
struct session {
  caf::actor_addr peer;
  std::map<region_handle, byte_ref> leases;

  /// Bytes still held (a lease of a stopped incarnation holds none).
  [[nodiscard]] std::uint64_t held_bytes() const {
    std::uint64_t n = 0;
    for (const auto& [h, ref] : leases)
      if (ref.valid())
        n += ref.bytes();
    return n;
  }
};

/// Why a region lookup failed. The error names the current generation, which the gateway asks
/// the supervisor for before replying (failures are rare; lookups stay synchronous).
struct lookup_failure {
  std::string op;
  std::uint64_t session = 0;
  bool no_session = false;
  region_handle wanted{};
  bool held_inert = false;  ///< the session leases exactly `wanted`, but its incarnation stopped
  std::optional<region_handle> same_id{};  ///< the session's lease of that id in another generation

  [[nodiscard]] caf::error to_error(const supervision_stats* sv) const {
    const auto sid = std::to_string(session);
    if (no_session)
      return make_caf_error(
          errc::invalid_argument,
          op + ": session " + sid + " is not open (never opened, closed, or its peer went down)");
    const auto what = op + ": " + to_string(wanted);
    const std::uint64_t current = sv ? sv->current_generation : 0;
    std::string now = "the allocator's current generation is unknown";
    if (sv && sv->state == supervisor_state::running)
      now = "the allocator now runs generation " + std::to_string(current);
    else if (sv)
      now = "the allocator is " + std::string(to_string(sv->state)) + " after generation " +
            std::to_string(current);
    const std::string also =
        same_id ? "; session " + sid + " leases " + to_string(*same_id) + " instead" : "";
    if (held_inert)
      return make_caf_error(errc::allocator_stopped,
                            what + " is stale: its allocator incarnation stopped and " + now +
                                " (its memory went with that incarnation; release the lease)");
    if (wanted.generation == 0)
      return make_caf_error(
          errc::invalid_argument,
          what + " names no allocator incarnation (generations start at 1)" + also);
    if (current != 0 && wanted.generation < current)
      return make_caf_error(errc::allocator_stopped, what + " is stale: " + now + also);
    if (current != 0 && wanted.generation > current)
      return make_caf_error(errc::invalid_argument, what + " does not exist: " + now + also);
    return make_caf_error(errc::invalid_argument, what + " is not leased by session " + sid + also);
  }
};

class remote_gateway final : public remote_allocator_actor::base {
 public:
  remote_gateway(caf::actor_config& cfg, allocator_supervisor_actor supervisor,
                 gateway_config config)
      : remote_allocator_actor::base(cfg),
        supervisor_(std::move(supervisor)),
        config_(std::move(config)) {
    set_down_handler([this](caf::down_msg& dm) { on_down(dm); });
  }

  behavior_type make_behavior() override {
    monitor(supervisor_);
    return {
        [this](open_session_atom, caf::actor& peer) -> caf::result<std::uint64_t> {
          return open_session(peer);
        },
        [this](close_session_atom, std::uint64_t sid) -> caf::result<std::uint64_t> {
          return close_session(sid);
        },
        [this](allocate_atom, std::uint64_t sid, remote_allocate_request& r)
            -> caf::result<region_handle> { return allocate(sid, std::move(r)); },
        [this](release_atom, std::uint64_t sid, region_handle h) -> caf::result<std::uint64_t> {
          return release(sid, h);
        },
        [this](prefetch_atom, std::uint64_t sid,
               remote_prefetch_request& r) -> caf::result<remote_op_result> {
          return with_refs<remote_op_result>(sid, r.regions, "prefetch", [&](auto refs) {
            return ask<remote_op_result, op_result>(
                to_remote_result, prefetch_atom_v,
                prefetch_request{std::move(refs), std::move(r.locations), {}, r.reply_when});
          });
        },
        [this](discard_atom, std::uint64_t sid,
               remote_discard_request& r) -> caf::result<remote_op_result> {
          return with_refs<remote_op_result>(sid, r.regions, "discard", [&](auto refs) {
            return ask<remote_op_result, op_result>(
                to_remote_result, discard_atom_v,
                discard_request{std::move(refs), {}, r.reply_when});
          });
        },
        [this](advise_atom, std::uint64_t sid,
               remote_advise_request& r) -> caf::result<remote_op_result> {
          return with_refs<remote_op_result>(sid, r.regions, "advise", [&](auto refs) {
            return ask<remote_op_result, op_result>(
                to_remote_result, advise_atom_v, advise_request{std::move(refs), r.what, r.where});
          });
        },
        [this](attributes_atom, std::uint64_t sid,
               region_handle h) -> caf::result<remote_attributes> {
          return with_refs<remote_attributes>(sid, {h}, "attributes", [&](auto refs) {
            return ask<remote_attributes, range_attributes>(
                [](const range_attributes& a) { return to_remote(a); }, attributes_atom_v,
                std::move(refs.front()));
          });
        },
        [this](stats_atom) -> caf::result<remote_stats> { return stats(); },
        [this](regions_atom) -> caf::result<std::vector<remote_region_info>> { return regions(); },
        [this](quota_atom a, std::uint64_t bytes) -> caf::result<std::uint64_t> {
          return ask<std::uint64_t, std::uint64_t>([](std::uint64_t q) { return q; }, a, bytes);
        },
        [](export_ipc_atom, std::uint64_t, region_handle h) -> caf::result<std::vector<char>> {
          return make_caf_error(
              errc::not_supported,
              "export_ipc: " + to_string(h) +
                  " cannot be exported: managed memory cannot be exported over CUDA IPC "
                  "(cudaIpcGetMemHandle supports device memory from cudaMalloc only); use the "
                  "remote interface's region ids instead");
        },
    };
  }

  void on_exit() override {
    // Dropping the refs releases the regions: the allocator is woken by its own waker.
    sessions_.clear();
    remote_allocator_actor::base::on_exit();
  }

 private:
  // -- sessions ----------------------------------------------------------------------------------

  caf::result<std::uint64_t> open_session(const caf::actor& peer) {
    if (!peer)
      return make_caf_error(errc::invalid_argument,
                            "open_session: no actor given; a session needs an actor of the "
                            "peer's process for the gateway to monitor");
    const auto sid = ++next_session_;
    sessions_[sid].peer = peer.address();
    monitor(peer);  // already down: the down message comes at once and ends the session
    log("session " + std::to_string(sid) + " opened by node " + caf::to_string(peer.node()));
    return sid;
  }

  caf::result<std::uint64_t> close_session(std::uint64_t sid) {
    auto it = sessions_.find(sid);
    if (it == sessions_.end())
      return lookup_failure{"close_session", sid, true}.to_error(nullptr);
    const std::uint64_t n = it->second.leases.size();
    end_session(it, "closed by its peer");
    return n;
  }

  void end_session(std::map<std::uint64_t, session>::iterator it, const std::string& why) {
    auto& s = it->second;
    demonitor(s.peer);
    log("session " + std::to_string(it->first) + " " + why + "; released " +
        std::to_string(s.leases.size()) + " lease(s), " + std::to_string(s.held_bytes()) +
        " bytes");
    sessions_.erase(it);  // drops the refs: the allocator frees what nobody else holds
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

  // -- leases ------------------------------------------------------------------------------------

  caf::result<region_handle> allocate(std::uint64_t sid, remote_allocate_request r) {
    if (!sessions_.contains(sid))
      return lookup_failure{"allocate", sid, true}.to_error(nullptr);
    auto rp = make_response_promise<region_handle>();
    request(supervisor_, caf::infinite, allocate_atom_v,
            allocate_request{r.bytes, 1, r.alignment, r.attach, {}, std::move(r.label)})
        .then(
            [this, rp, sid](byte_ref& ref) mutable {
              auto it = sessions_.find(sid);
              if (it == sessions_.end()) {
                // The session ended while the allocator worked: the ref drops here, and with
                // it the region.
                rp.deliver(lookup_failure{"allocate", sid, true}.to_error(nullptr));
                return;
              }
              const region_handle h{ref.id(), ref.generation()};
              it->second.leases.insert_or_assign(h, std::move(ref));
              rp.deliver(h);
            },
            [this, rp](caf::error& err) mutable { rp.deliver(relay(std::move(err))); });
    return rp;
  }

  caf::result<std::uint64_t> release(std::uint64_t sid, region_handle h) {
    auto it = sessions_.find(sid);
    if (it != sessions_.end()) {
      auto lease = it->second.leases.find(h);
      if (lease != it->second.leases.end()) {
        // A lease of a stopped incarnation gives nothing back: its memory went with it.
        const std::uint64_t bytes = lease->second.valid() ? lease->second.bytes() : 0;
        it->second.leases.erase(lease);
        return bytes;
      }
    }
    std::vector<byte_ref> none;
    return fail<std::uint64_t>(*resolve(sid, {h}, "release", none));
  }

  /// The refs of `handles`, all leased by session `sid` and alive; or why not.
  std::optional<lookup_failure> resolve(std::uint64_t sid,
                                        const std::vector<region_handle>& handles, const char* op,
                                        std::vector<byte_ref>& refs) {
    auto it = sessions_.find(sid);
    if (it == sessions_.end())
      return lookup_failure{op, sid, true};
    const auto& leases = it->second.leases;
    refs.reserve(handles.size());
    for (const auto& h : handles) {
      auto lease = leases.find(h);
      if (lease != leases.end() && lease->second.valid()) {
        refs.push_back(lease->second);
        continue;
      }
      lookup_failure f{op, sid, false, h, lease != leases.end()};
      for (auto same = leases.lower_bound({h.id, 0});
           same != leases.end() && same->first.id == h.id; ++same)
        if (same->first != h)
          f.same_id = same->first;
      return f;
    }
    return std::nullopt;
  }

  /// Runs `then(refs)` when every handle resolves; otherwise replies the lookup failure.
  template <class R, class Then>
  caf::result<R> with_refs(std::uint64_t sid, const std::vector<region_handle>& handles,
                           const char* op, Then then) {
    if (handles.empty())
      return make_caf_error(errc::invalid_argument, std::string(op) + ": no regions given");
    std::vector<byte_ref> refs;
    if (auto failure = resolve(sid, handles, op, refs))
      return fail<R>(std::move(*failure));
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

  /// Sends `xs` to the supervisor and replies its answer converted to the wire type.
  template <class R, class Local, class Convert, class... Ts>
  caf::typed_response_promise<R> ask(Convert convert, Ts... xs) {
    auto rp = make_response_promise<R>();
    request(supervisor_, caf::infinite, std::move(xs)...)
        .then([rp, convert](Local& x) mutable { rp.deliver(convert(x)); },
              [this, rp](caf::error& err) mutable { rp.deliver(relay(std::move(err))); });
    return rp;
  }

  /// uma errors cross unchanged; CAF's own (the supervisor is gone) become allocator_stopped.
  caf::error relay(caf::error err) {
    if (err.category() == error_category)
      return err;
    return make_caf_error(
        errc::allocator_stopped,
        "the serving node's allocator supervisor did not answer (" + system().render(err) + ")");
  }

  static remote_op_result to_remote_result(const op_result& r) {
    return {r.ranges, r.bytes, r.completed, r.backend_ranges};
  }

  caf::result<remote_stats> stats() {
    auto rp = make_response_promise<remote_stats>();
    request(supervisor_, caf::infinite, stats_atom_v)
        .then(
            [this, rp](allocator_stats& a) mutable {
              remote_stats out;
              out.allocator = std::move(a);
              out.sessions = sessions_.size();
              out.sessions_lost = sessions_lost_;
              for (const auto& [sid, s] : sessions_) {
                out.leases += s.leases.size();
                out.leased_bytes += s.held_bytes();
              }
              request(supervisor_, caf::infinite, supervision_atom_v)
                  .then(
                      [rp, out](supervision_stats& sv) mutable {
                        out.restarts = sv.restarts;
                        out.supervisor = sv.state;
                        rp.deliver(std::move(out));
                      },
                      [this, rp](caf::error& err) mutable { rp.deliver(relay(std::move(err))); });
            },
            [this, rp](caf::error& err) mutable { rp.deliver(relay(std::move(err))); });
    return rp;
  }

  /// The supervisor's region report, with attributes read for every leased region.
  caf::result<std::vector<remote_region_info>> regions() {
    auto rp = make_response_promise<std::vector<remote_region_info>>();
    request(supervisor_, caf::infinite, regions_atom_v)
        .then(
            [this, rp](std::vector<region_info>& rows) mutable {
              std::map<region_handle, std::pair<std::uint64_t, byte_ref>> leased;
              for (const auto& [sid, s] : sessions_)
                for (const auto& [h, ref] : s.leases)
                  if (ref.valid())
                    leased.emplace(h, std::pair(sid, ref));
              auto out = std::make_shared<std::vector<remote_region_info>>();
              auto remaining = std::make_shared<std::size_t>(0);
              for (auto& row : rows) {
                const region_handle h{row.id, row.generation};
                out->push_back({std::move(row)});
                if (auto it = leased.find(h); it != leased.end()) {
                  out->back().session = it->second.first;
                  ++*remaining;
                }
              }
              if (*remaining == 0) {
                rp.deliver(std::move(*out));
                return;
              }
              for (std::size_t i = 0; i < out->size(); ++i) {
                if ((*out)[i].session == 0)
                  continue;
                const auto& ref = leased.at({(*out)[i].region.id, (*out)[i].region.generation});
                auto done = [rp, out, remaining]() mutable {
                  if (--*remaining == 0)
                    rp.deliver(std::move(*out));
                };
                request(supervisor_, caf::infinite, attributes_atom_v, ref.second)
                    .then(
                        [out, i, done](range_attributes& a) mutable {
                          (*out)[i].attributes_known = true;
                          (*out)[i].attributes = to_remote(a);
                          done();
                        },
                        [done](caf::error&) mutable { done(); });  // freed meanwhile: unknown
              }
            },
            [this, rp](caf::error& err) mutable { rp.deliver(relay(std::move(err))); });
    return rp;
  }

  void log(const std::string& line) const {
    if (config_.log)
      config_.log(line);
  }

  allocator_supervisor_actor supervisor_;
  gateway_config config_;
  std::map<std::uint64_t, session> sessions_;
  std::uint64_t next_session_ = 0;
  std::uint64_t sessions_lost_ = 0;
};

}  // namespace

remote_allocator_actor spawn_remote_gateway(caf::actor_system& sys,
                                            allocator_supervisor_actor supervisor,
                                            gateway_config config) {
  return sys.spawn<remote_gateway>(std::move(supervisor), std::move(config));
}

std::uint16_t publish_gateway(caf::actor_system& sys, const remote_allocator_actor& gateway,
                              std::uint16_t port, const std::string& bind) {
  if (bind.empty())
    raise(errc::invalid_argument,
          "publish: empty bind address (CAF would listen on every interface); name one, "
          "e.g. 127.0.0.1");
  if (!sys.has_middleman())
    raise(errc::invalid_argument,
          "publish: the actor system has no middleman; load it with "
          "cfg.load<caf::io::middleman>()");
  auto bound = sys.middleman().publish(gateway, port, bind.c_str(), false);
  if (!bound)
    raise(errc::backend_error, "publish: cannot listen on " + bind + ":" + std::to_string(port) +
                                   ": " + sys.render(bound.error()));
  return *bound;
}

bool is_loopback_address(std::string_view address) noexcept {
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']')
    address = address.substr(1, address.size() - 2);
  if (address == "localhost")
    return true;
  char text[INET6_ADDRSTRLEN + 1] = {};
  if (address.empty() || address.size() >= sizeof text)
    return false;
  address.copy(text, address.size());
  in_addr v4{};
  if (inet_pton(AF_INET, text, &v4) == 1)
    return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, text, &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6))
      return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace uma
