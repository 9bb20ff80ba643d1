#include <uma/actors/remote_client.hpp>

#include <functional>
#include <map>
#include <optional>
#include <set>

#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <uma/actors/detail/call_channel.hpp>
#include <uma/actors/detail/remote_checks.hpp>

namespace uma {

namespace {

using moves = residency_result;  // the reply of a plan and of dead
using handles = std::vector<region_handle>;
using rows = std::vector<remote_region_info>;
using op = remote_op_result;

/// The client's local end of a session. The gateway monitors it (so the session ends when this
/// process dies), and it monitors the gateway: calls are relayed through it, and when the
/// gateway's connection drops every call in flight fails at once instead of at its timeout.
class session_relay final : public remote_allocator_actor::base {
 public:
  session_relay(caf::actor_config& cfg, remote_allocator_actor gateway, std::string address)
      : remote_allocator_actor::base(cfg),
        gateway_(std::move(gateway)),
        address_(std::move(address)) {
    set_down_handler([this](caf::down_msg& dm) {
      if (dm.source != gateway_.address())
        return;
      lost_ = "the uma server at " + address_ + " went down (" +
              (dm.reason ? system().render(dm.reason) : std::string("normal exit")) + ")";
      auto pending = std::exchange(pending_, {});
      for (auto& [id, fail] : pending)
        fail(make_caf_error(errc::allocator_stopped, lost_ + " before it replied"));
    });
  }

  behavior_type make_behavior() override {
    monitor(gateway_);
    return {
        [this](open_session_atom a, caf::actor&) -> caf::result<session_key> {
          // The gateway monitors this actor, not the one a caller may have named.
          return relay<session_key>(a, caf::actor_cast<caf::actor>(this));
        },
        [this](close_session_atom a, const session_key& sid) -> caf::result<std::uint64_t> {
          return relay<std::uint64_t>(a, sid);
        },
        [this](allocate_atom a, const session_key& sid, remote_allocate_request& r)
            -> caf::result<region_handle> { return relay<region_handle>(a, sid, std::move(r)); },
        [this](release_atom a, const session_key& sid, region_handle h)
            -> caf::result<std::uint64_t> { return relay<std::uint64_t>(a, sid, h); },
        [this](prefetch_atom a, const session_key& k, remote_prefetch_request& r)
            -> caf::result<op> { return relay<op>(a, k, std::move(r)); },
        [this](discard_atom a, const session_key& k, remote_discard_request& r) -> caf::result<op> {
          return relay<op>(a, k, std::move(r));
        },
        [this](advise_atom a, const session_key& k, remote_advise_request& r) -> caf::result<op> {
          return relay<op>(a, k, std::move(r));
        },
        [this](will_access_atom a, const session_key& k, remote_access_plan& r)
            -> caf::result<moves> { return relay<moves>(a, k, std::move(r)); },
        [this](done_with_atom a, const session_key& k, handles& hs) -> caf::result<std::uint64_t> {
          return relay<std::uint64_t>(a, k, std::move(hs));
        },
        [this](dead_atom a, const session_key& k, handles& hs) -> caf::result<moves> {
          return relay<moves>(a, k, std::move(hs));
        },
        [this](attributes_atom a, const session_key& sid, region_handle h)
            -> caf::result<remote_attributes> { return relay<remote_attributes>(a, sid, h); },
        [this](stats_atom a) -> caf::result<remote_stats> { return relay<remote_stats>(a); },
        [this](regions_atom a, const session_key& k) -> caf::result<rows> {
          return relay<rows>(a, k);
        },
        [this](regions_atom a, const operator_key& k) -> caf::result<rows> {
          return relay<rows>(a, k);
        },
        [this](snapshot_atom a) -> caf::result<remote_snapshot> {
          return relay<remote_snapshot>(a);
        },
        [this](snapshot_atom a, const operator_key& k) -> caf::result<remote_snapshot> {
          return relay<remote_snapshot>(a, k);
        },
        [this](quota_atom a, std::uint64_t bytes) -> caf::result<std::uint64_t> {
          return relay<std::uint64_t>(a, bytes);
        },
        [this](quota_atom a, const operator_key& k, std::uint64_t bytes)
            -> caf::result<std::uint64_t> { return relay<std::uint64_t>(a, k, bytes); },
        [this](restart_atom a) -> caf::result<std::uint64_t> { return relay<std::uint64_t>(a); },
        [this](restart_atom a, const operator_key& k) -> caf::result<std::uint64_t> {
          return relay<std::uint64_t>(a, k);
        },
        [this](export_ipc_atom a, const session_key& sid, region_handle h)
            -> caf::result<std::vector<char>> { return relay<std::vector<char>>(a, sid, h); },
    };
  }

 private:
  template <class R, class... Ts>
  caf::result<R> relay(Ts... xs) {
    if (!lost_.empty())
      return make_caf_error(errc::allocator_stopped, lost_);
    auto rp = make_response_promise<R>();
    const auto id = ++next_id_;
    pending_.emplace(id, [rp](caf::error err) mutable { rp.deliver(std::move(err)); });
    request(gateway_, caf::infinite, std::move(xs)...)
        .then(
            [this, rp, id](R& r) mutable {
              if (pending_.erase(id) != 0)
                rp.deliver(std::move(r));
            },
            [this, rp, id](caf::error& err) mutable {
              if (pending_.erase(id) == 0)
                return;  // already failed by the down handler
              if (err.category() != error_category)
                err = make_caf_error(errc::allocator_stopped, "the uma server at " + address_ +
                                                                  " did not reply (" +
                                                                  system().render(err) + ")");
              rp.deliver(std::move(err));
            });
    return rp;
  }

  remote_allocator_actor gateway_;
  std::string address_;
  std::string lost_;  ///< why the gateway is gone; empty while connected
  std::uint64_t next_id_ = 0;
  std::map<std::uint64_t, std::function<void(caf::error)>> pending_;
};

[[noreturn]] void connect_failed(const std::string& address, const std::string& why) {
  raise(errc::backend_error, "cannot reach the uma server at " + address + ": " + why);
}

}  // namespace

template <class R, class... Ts>
R remote_client::call(Ts&&... xs) {
  if (closed_)
    raise(errc::invalid_argument, "remote_client: the session with the uma server at " + address_ +
                                      " is closed (close() was called)");
  auto reply = channel_->request(caf::actor_cast<caf::strong_actor_ptr>(session_actor_),
                                 caf::make_message(std::forward<Ts>(xs)...), timeout_);
  caf::error err;
  if (auto value = detail::reply_value<R>(reply, err))
    return std::move(*value);
  if (err.category() == error_category)
    throw to_uma_error(err);
  if (err == caf::sec::request_timeout)
    raise(errc::backend_error, "no reply from the uma server at " + address_ + " within " +
                                   std::to_string(timeout_.count()) + " ms");
  throw to_uma_error(err);
}

remote_client::remote_client(caf::actor_system& sys, std::string host, std::uint16_t port,
                             std::chrono::milliseconds timeout)
    : sys_(sys),
      channel_(std::make_unique<detail::call_channel>(sys)),
      address_(host + ":" + std::to_string(port)),
      timeout_(timeout) {
  if (!sys.has_middleman())
    raise(errc::invalid_argument,
          "remote_client: the actor system has no middleman; load it with "
          "cfg.load<caf::io::middleman>()");
  // The middleman actor's connect, rather than middleman().remote_actor(): the latter waits
  // without a limit when a server accepts the connection but never answers.
  caf::scoped_actor self{sys};
  caf::strong_actor_ptr found;
  std::set<std::string> interface;
  std::optional<caf::error> err;
  // With TLS loaded (enable_tls), the OpenSSL module's middleman actor connects instead.
  const auto connector = sys.has_openssl_manager() ? sys.openssl_manager().actor_handle()
                                                   : sys.middleman().actor_handle();
  self->request(connector, caf::duration{timeout}, caf::connect_atom_v, std::move(host), port)
      .receive(
          [&](const caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>& ifs) {
            found = std::move(ptr);
            interface = std::move(ifs);
          },
          [&](caf::error& e) { err = std::move(e); });
  if (err)
    connect_failed(address_, sys.render(*err));
  if (!found)
    connect_failed(address_, "no actor is published there");
  if (!sys.assignable<remote_allocator_actor>(interface))
    connect_failed(address_,
                   "the actor published there is not a uma gateway (another interface, or "
                   "another version of uma)");
  gateway_ = caf::actor_cast<remote_allocator_actor>(std::move(found));
  session_actor_ = sys.spawn<session_relay>(gateway_, address_);
  try {
    session_ = call<session_key>(open_session_atom_v, caf::actor{});
  } catch (const error& e) {
    caf::anon_send_exit(session_actor_, caf::exit_reason::user_shutdown);
    connect_failed(address_, std::string("cannot open a session: ") + e.what());
  }
}

remote_client::~remote_client() {
  try {
    close();
  } catch (const std::exception&) {
    // The server is gone or slow: the session ends anyway when the session actor goes down.
  }
  caf::anon_send_exit(session_actor_, caf::exit_reason::user_shutdown);
}

void remote_client::close() {
  if (closed_)
    return;
  struct mark_closed {  // closed even when the server does not answer: later calls fail here
    bool& closed;
    ~mark_closed() { closed = true; }
  } mark{closed_};
  static_cast<void>(call<std::uint64_t>(close_session_atom_v, session_));
}

region_handle remote_client::allocate(std::uint64_t bytes, std::string label,
                                      std::uint64_t alignment, attach_flag attach) {
  return call<region_handle>(allocate_atom_v, session_,
                             remote_allocate_request{bytes, alignment, attach, std::move(label)});
}

std::uint64_t remote_client::release(region_handle region) {
  return call<std::uint64_t>(release_atom_v, session_, region);
}

remote_op_result remote_client::prefetch(std::vector<region_handle> regions,
                                         std::vector<location> locations, completion when) {
  return call<remote_op_result>(
      prefetch_atom_v, session_,
      remote_prefetch_request{std::move(regions), std::move(locations), when});
}

remote_op_result remote_client::discard(std::vector<region_handle> regions, completion when) {
  return call<remote_op_result>(discard_atom_v, session_,
                                remote_discard_request{std::move(regions), when});
}

residency_result remote_client::will_access(remote_access_plan plan) {
  return call<residency_result>(will_access_atom_v, session_, std::move(plan));
}

std::uint64_t remote_client::done_with(std::vector<region_handle> regions) {
  return call<std::uint64_t>(done_with_atom_v, session_, std::move(regions));
}

residency_result remote_client::dead(std::vector<region_handle> regions) {
  return call<residency_result>(dead_atom_v, session_, std::move(regions));
}

remote_op_result remote_client::advise(std::vector<region_handle> regions, advice what,
                                       location where) {
  return call<remote_op_result>(advise_atom_v, session_,
                                remote_advise_request{std::move(regions), what, where});
}

range_attributes remote_client::attributes(region_handle region) {
  return to_local(call<remote_attributes>(attributes_atom_v, session_, region));
}

remote_stats remote_client::stats() {
  return call<remote_stats>(stats_atom_v);
}

std::vector<remote_region_info> remote_client::regions() {
  return call<std::vector<remote_region_info>>(regions_atom_v, session_);
}

std::vector<remote_region_info> remote_client::regions(const operator_key& key) {
  return call<std::vector<remote_region_info>>(regions_atom_v, key);
}

remote_snapshot remote_client::snapshot(const operator_key& key) {
  auto s = call<remote_snapshot>(snapshot_atom_v, key);
  if (auto bad = detail::check_snapshot(s))
    raise(errc::backend_error,
          "the uma server at " + address_ + " sent a malformed " + bad->message);
  return s;
}

std::uint64_t remote_client::quota() {
  return call<std::uint64_t>(quota_atom_v, std::uint64_t{0});
}

std::uint64_t remote_client::set_quota(const operator_key& key, std::uint64_t bytes) {
  return call<std::uint64_t>(quota_atom_v, key, bytes);
}

std::uint64_t remote_client::restart(const operator_key& key) {
  return call<std::uint64_t>(restart_atom_v, key);
}

void remote_client::export_ipc(region_handle region) {
  static_cast<void>(call<std::vector<char>>(export_ipc_atom_v, session_, region));
}

}  // namespace uma
