#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include <uma/messages/error_category.hpp>
#include <uma/messages/remote_interface.hpp>

namespace uma {

namespace detail {
class call_channel;
}

/// A blocking client of a serving node's remote gateway (`uma serve`, or any process that
/// published one with `publish_gateway`), for tools, tests and plain threads. The actor system
/// must have uma's types registered and the middleman loaded:
///
///     struct config : caf::actor_system_config {
///       config() { uma::register_types(*this); load<caf::io::middleman>(); }
///     };
///
/// Construction connects and opens a session: a local actor of this process that the gateway
/// monitors. Regions allocated through the client are leases of that session; they end with
/// `release`, with the client (its destructor closes the session), or when this process dies
/// (the connection drops and the gateway sees the session actor go down).
///
/// Each call sends one request and waits at most the timeout for its reply, through the same
/// call channel as `uma::client` (docs/design.md "Blocking callers": the local session actor
/// runs on the calling thread, the reply fills a slot the caller spins on). A uma error reply
/// is thrown as `uma::error` with the same code and message. When the serving node goes down
/// (its connection drops) every call in flight, and every later one, throws
/// `error(allocator_stopped)` naming the server at once rather than at the timeout; a server
/// that does not answer in time gives `error(backend_error)` naming the timeout. The calls are
/// safe to use from several threads at once; `close`, `set_timeout` and the destructor must not
/// race with them.
class remote_client {
 public:
  /// Connects to the gateway at `host`:`port` and opens a session, each step bounded by
  /// `timeout`. Throws `error(backend_error)` naming the address when nothing answers there,
  /// when the actor published there is not a uma gateway, or when the session cannot open.
  remote_client(caf::actor_system& sys, std::string host, std::uint16_t port,
                std::chrono::milliseconds timeout = std::chrono::seconds(30));
  remote_client(const remote_client&) = delete;
  remote_client& operator=(const remote_client&) = delete;
  /// Closes the session (its leases are released) unless the server is gone; waits at most the
  /// timeout for the server to confirm.
  ~remote_client();

  /// "127.0.0.1:4242".
  [[nodiscard]] const std::string& address() const noexcept { return address_; }
  /// The session id the gateway gave this client.
  [[nodiscard]] std::uint64_t session() const noexcept { return session_.id; }
  /// The session's key (id and secret): requests about the session carry it.
  [[nodiscard]] const session_key& key() const noexcept { return session_; }
  /// The gateway's proxy, for actors that want to talk to it directly (with `key()`; the gateway
  /// also wants such requests to come from this process's node).
  [[nodiscard]] const remote_allocator_actor& gateway() const noexcept { return gateway_; }
  /// How long each call waits for its reply (the constructor's timeout by default).
  void set_timeout(std::chrono::milliseconds timeout) noexcept { timeout_ = timeout; }

  /// Allocates `bytes` on the serving node, leased by this session.
  [[nodiscard]] region_handle allocate(std::uint64_t bytes, std::string label = {},
                                       std::uint64_t alignment = 0,
                                       attach_flag attach = attach_flag::global);
  /// Ends the lease of `region`; returns the bytes it gave back (0 for a stale lease).
  std::uint64_t release(region_handle region);
  /// Prefetches `regions` to one location (broadcast) or one per region.
  remote_op_result prefetch(std::vector<region_handle> regions, std::vector<location> locations,
                            completion when = completion::enqueued);
  /// Discards the contents of `regions`.
  remote_op_result discard(std::vector<region_handle> regions,
                           completion when = completion::enqueued);
  /// Applies advice to `regions`.
  remote_op_result advise(std::vector<region_handle> regions, advice what,
                          location where = location::host());
  /// An access plan on leased regions (docs/residency.md "Tenants"): placed on the plan's
  /// device and held until done_with; they count for this session's tenant (its node).
  residency_result will_access(remote_access_plan plan);
  /// The plans on `regions` are over. Returns the holds ended.
  std::uint64_t done_with(std::vector<region_handle> regions);
  /// The contents of `regions` are not needed: discarded, nothing moves back.
  residency_result dead(std::vector<region_handle> regions);
  /// Advice and last prefetch location of a leased region, as the serving node reads them.
  [[nodiscard]] range_attributes attributes(region_handle region);
  /// The serving node's allocator, supervisor and gateway counters.
  [[nodiscard]] remote_stats stats();
  /// The regions this session leases.
  [[nodiscard]] std::vector<remote_region_info> regions();
  /// The serving node's whole region table; needs its operator key.
  [[nodiscard]] std::vector<remote_region_info> regions(const operator_key& key);
  /// The serving node's snapshot: every region (with the session leasing it), the counters and
  /// the event history; needs its operator key. Throws `error(invalid_argument)` for a wrong key,
  /// `error(allocator_stopped)` when the serving node's allocator stopped, and
  /// `error(backend_error)` when the server's reply has a value out of range.
  [[nodiscard]] remote_snapshot snapshot(const operator_key& key);
  /// The quota in force.
  [[nodiscard]] std::uint64_t quota();
  /// Sets the quota (needs the operator key; never above the node's ceiling); returns it.
  std::uint64_t set_quota(const operator_key& key, std::uint64_t bytes);
  /// The supervisor's explicit restart of the serving node's allocator (needs the operator
  /// key): every session's leases end with the old generation. Returns the new generation;
  /// throws `error(invalid_argument)` for a wrong key.
  std::uint64_t restart(const operator_key& key);
  /// Always throws `error(not_supported)`: managed memory is never exported over CUDA IPC.
  void export_ipc(region_handle region);

  /// Closes the session now (its leases are released); later calls fail with
  /// `error(invalid_argument)` naming the closed session, without a message. Idempotent.
  void close();

 private:
  template <class R, class... Ts>
  R call(Ts&&... xs);

  caf::actor_system& sys_;
  std::unique_ptr<detail::call_channel> channel_;
  std::string address_;
  std::chrono::milliseconds timeout_;
  remote_allocator_actor gateway_;
  remote_allocator_actor session_actor_;  ///< local: what the gateway monitors; relays calls
  session_key session_{};
  bool closed_ = false;
};

}  // namespace uma
