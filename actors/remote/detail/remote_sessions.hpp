#pragma once

// The remote gateway's bookkeeping (actors/remote/remote_gateway.cpp): sessions (each with its
// lease book, actors/remote/detail/lease_book.hpp) and why a lookup failed. Plain data; the gateway
// actor owns it and is its only user.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_addr.hpp>
#include <caf/error.hpp>
#include <caf/node_id.hpp>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include <uma/actors/remote/detail/lease_book.hpp>
#include <uma/actors/remote/detail/lease_totals.hpp>
#include <uma/actors/remote/detail/remote_checks.hpp>
#include <uma/actors/remote/gateway_config.hpp>
#include <uma/memory/managed_ref.hpp>
#include <uma/messages/remote_types.hpp>
#include <uma/messages/supervision_types.hpp>

namespace uma::detail {

/// One remote peer's session: the actor the gateway monitors for it, the node it belongs to
/// (the tenant), its secret and its leases.
struct session {
  /// A session of `peer` for `tenant` opened now with `key`'s secret; its leases count in
  /// `tenant_leases`, the tenant's totals (actors/remote/detail/tenant_totals.hpp).
  session(const caf::actor& peer, const session_key& key, std::string tenant,
          std::shared_ptr<lease_totals> tenant_leases);

  caf::actor_addr peer;
  caf::node_id node;
  std::string tenant;  ///< who opened it: quotas and session caps count per tenant
  std::uint64_t secret_hi = 0;
  std::uint64_t secret_lo = 0;
  std::shared_ptr<const lease_totals> tenant_leases;  ///< every lease of its tenant, counted
  lease_book leases;
  std::uint32_t in_flight = 0;  ///< requests forwarded and not yet answered
  std::chrono::steady_clock::time_point last_used{};

  /// Compares the secret in constant time.
  [[nodiscard]] bool has_secret(const session_key& key) const noexcept;
};

/// The sessions idle (no request in flight, none for longer than `timeout`); none for a timeout
/// of 0.
[[nodiscard]] std::vector<std::uint64_t> idle_sessions(
    const std::map<std::uint64_t, session>& sessions, std::chrono::milliseconds timeout);
/// Sessions of `tenant` in `sessions`.
[[nodiscard]] std::size_t sessions_of(const std::map<std::uint64_t, session>& sessions,
                                      const std::string& tenant);
/// The residency tenant a session's plans count for: who opened it (docs/residency.md).
[[nodiscard]] std::string tenant_of(const session& s);

/// 128 bits from the kernel's random source (getrandom); throws backend_error if it fails.
void random_secret(std::uint64_t& hi, std::uint64_t& lo);
/// A fresh operator key.
[[nodiscard]] operator_key random_operator_key();
/// Constant-time comparison; false when `configured` is empty.
[[nodiscard]] bool operator_key_matches(const operator_key& configured,
                                        const operator_key& given) noexcept;

/// Whether the gateway must drop `x` before CAF handles it, and why (for the log): an exit
/// message counts only from a local, named sender (the owner stopping the gateway; the exit's own
/// `source` field is whatever the wire said, and CAF 0.17 quits on reason `kill` whatever the
/// exit handler says); a down message only when its sender is the actor it reports on, as CAF's
/// monitors send them; a link from a remote actor never.
[[nodiscard]] std::optional<std::string> refused_system_message(const caf::mailbox_element& x,
                                                                const caf::node_id& here,
                                                                caf::actor_system& sys);

/// Leased regions: their session and a ref to read their attributes with.
using leased_map = std::map<region_handle, std::pair<std::uint64_t, byte_ref>>;

/// The live leases of every session (the operator's views; a session's own page is cut from its
/// lease book: actors/remote/detail/session_page.hpp).
[[nodiscard]] leased_map live_leases(const std::map<std::uint64_t, session>& sessions);

/// The region report's rows as the remote interface sends them: each leased one (in `leased`)
/// with its session.
[[nodiscard]] std::vector<remote_region_info> report_rows(std::vector<region_info> rows,
                                                          const leased_map& leased);

/// Rows `p.start` to `p.start + count` of `rows` (count: `p.count`, 0 meaning `cap`, never more
/// than `cap`), and how many rows there were.
[[nodiscard]] remote_region_page cut_page(std::vector<remote_region_info> rows, region_page p,
                                          std::uint32_t cap);

/// Sets the sessions, leases and leased bytes of `out` from `sessions` and `all`, the totals of
/// their leases (read, never summed).
void count_leases(remote_stats& out, const std::map<std::uint64_t, session>& sessions,
                  const lease_totals& all);

/// `s` in wire form, each region that a session leases (a live lease in `sessions`) with that
/// session's id; the others keep session 0.
[[nodiscard]] remote_snapshot with_sessions(const allocator_snapshot& s,
                                            const std::map<std::uint64_t, session>& sessions);

/// An error of the supervisor as the gateway replies it: uma errors cross unchanged; CAF's own
/// (the supervisor is gone) become allocator_stopped.
[[nodiscard]] caf::error relay_error(caf::actor_system& sys, caf::error err);

/// The refusal of `export_ipc` for `h`: managed memory cannot be exported over CUDA IPC.
[[nodiscard]] caf::error ipc_refusal(const region_handle& h);

/// The refusal of an operator's request (`what`) made without the operator key.
[[nodiscard]] caf::error operator_refusal(const std::string& what);

/// The most `r` may hold once allocated: its bytes, the padding its alignment may add (up to
/// alignment - 1: what the allocator's quota charges), and its label; nullopt when that
/// overflows. Requests are admitted by it; a lease is then charged what its region holds.
[[nodiscard]] std::optional<std::uint64_t> admission_charge(const remote_allocate_request& r);

/// Why `s` may not allocate `r` now: the request's fields (actors/remote/detail/remote_checks.hpp),
/// the quota ceiling, the session's lease cap and its tenant's quota (the totals of its tenant's
/// leases, read: no lease is visited). Nullopt when it may.
[[nodiscard]] std::optional<refusal> admit(const session& s, const remote_allocate_request& r,
                                           const gateway_config& config, std::uint64_t ceiling);

/// Why `peer` cannot be the actor of a session that `sender` opens on the serving node whose
/// gateway and supervisor are given: none, an anonymous sender, one of those two, or an actor
/// of another node than the sender's. Nullopt when it can.
[[nodiscard]] std::optional<std::string> refuse_peer(const caf::actor& peer,
                                                     const caf::strong_actor_ptr& sender,
                                                     const caf::actor_addr& gateway,
                                                     const caf::actor_addr& supervisor);

/// Why a region lookup failed. The error names the current generation, which the gateway asks
/// the supervisor for before replying (failures are rare; lookups stay synchronous).
struct lookup_failure {
  std::string op;
  std::uint64_t session = 0;
  bool no_session = false;
  lease_miss miss{};  ///< the handle that failed (when the session is open)

  [[nodiscard]] caf::error to_error(const supervision_stats* sv) const;
};

}  // namespace uma::detail

namespace uma::detail {

/// The refs of `handles`, all leased by session `s` (id `sid`) and alive, appended to `refs`;
/// or why not (for operation `op`).
[[nodiscard]] std::optional<lookup_failure> resolve(const session& s, std::uint64_t sid,
                                                    const std::vector<region_handle>& handles,
                                                    const char* op, std::vector<byte_ref>& refs);

}  // namespace uma::detail
