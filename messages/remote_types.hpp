#pragma once

// The value types of the remote-safe interface (messages/remote_interface.hpp). Everything here
// is plain data that serializes through CAF's `inspect`: ids, generations, sizes, labels,
// locations, advice. Pointers, streams and `ManagedRef`s have no place here; a region is named
// by its id and the generation of the allocator incarnation that owns it.

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <uma/memory/allocator_snapshot.hpp>
#include <uma/memory/allocator_stats.hpp>
#include <uma/memory/region_info.hpp>
#include <uma/messages/inspect.hpp>
#include <uma/messages/requests.hpp>
#include <uma/messages/supervision_types.hpp>
#include <uma/sys/advice.hpp>
#include <uma/sys/backend.hpp>
#include <uma/sys/location.hpp>

namespace uma {

/// A region as a remote peer names it: its id and the generation (allocator incarnation) it
/// belongs to. Ids restart at 1 in every generation, so only the pair is unique.
struct region_handle {
  std::uint64_t id = 0;
  std::uint64_t generation = 0;
  friend constexpr auto operator<=>(const region_handle&, const region_handle&) = default;
};

/// "region 3 of generation 1".
[[nodiscard]] std::string to_string(const region_handle& h);

template <class Inspector>
auto inspect(Inspector& f, region_handle& x) {
  return f(x.id, x.generation);
}

/// What a tenant holds to act on its session: the session's id and a 128-bit secret drawn by
/// the serving node from the kernel's random source when the session opened. Ids are small and
/// sequential; the secret is what proves the holder opened the session. Every request about a
/// session's leases carries its key, and the gateway also requires the request to come from the
/// node that opened the session.
struct session_key {
  std::uint64_t id = 0;
  std::uint64_t secret_hi = 0;
  std::uint64_t secret_lo = 0;
  friend bool operator==(const session_key&, const session_key&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, session_key& x) {
  return f(x.id, x.secret_hi, x.secret_lo);
}

/// The operator's capability (quota, everyone's region table): a 128-bit secret the serving
/// node draws at start and never hands out; its wire server adds it to the requests of the
/// operator's connections (the operator socket, or a certificate `--operator-cn` names). An
/// all-zero key is never accepted.
struct operator_key {
  std::uint64_t secret_hi = 0;
  std::uint64_t secret_lo = 0;
  [[nodiscard]] bool empty() const noexcept { return secret_hi == 0 && secret_lo == 0; }
  friend bool operator==(const operator_key&, const operator_key&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, operator_key& x) {
  return f(x.secret_hi, x.secret_lo);
}

/// 32 lower-case hex digits; `parse_operator_key` reads them back (nullopt for anything else).
[[nodiscard]] std::string to_hex(const operator_key& k);
[[nodiscard]] std::optional<operator_key> parse_operator_key(std::string_view text);

/// Allocate `bytes` on the serving node, held by a lease of the requesting session.
struct remote_allocate_request {
  std::uint64_t bytes = 0;
  std::uint64_t alignment = 0;  ///< power of two; 0: the backend's natural alignment
  attach_flag attach = attach_flag::global;
  std::string label{};
  friend bool operator==(const remote_allocate_request&, const remote_allocate_request&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, remote_allocate_request& x) {
  return f(x.bytes, x.alignment, x.attach, x.label);
}

/// Prefetch leased regions to one location (broadcast) or one location per region.
struct remote_prefetch_request {
  std::vector<region_handle> regions{};
  std::vector<location> locations{};
  completion reply_when = completion::enqueued;
  friend bool operator==(const remote_prefetch_request&, const remote_prefetch_request&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, remote_prefetch_request& x) {
  return f(x.regions, x.locations, x.reply_when);
}

/// Discard the contents of leased regions.
struct remote_discard_request {
  std::vector<region_handle> regions{};
  completion reply_when = completion::enqueued;
  friend bool operator==(const remote_discard_request&, const remote_discard_request&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, remote_discard_request& x) {
  return f(x.regions, x.reply_when);
}

/// Apply advice to leased regions.
struct remote_advise_request {
  std::vector<region_handle> regions{};
  advice what = advice::set_read_mostly;
  location where = location::host();
  friend bool operator==(const remote_advise_request&, const remote_advise_request&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, remote_advise_request& x) {
  return f(x.regions, x.what, x.where);
}

/// An access plan on leased regions (docs/residency.md "Tenants"): placed on `device` for
/// `mode` under `policy`. A session's plans count for its tenant (its peer node), which the
/// serving node may hold under a device budget of its own.
struct remote_access_plan {
  std::vector<region_handle> regions{};
  int device = 0;
  access_mode mode = access_mode::read;
  residency_policy policy = residency_policy::automatic;
  completion reply_when = completion::enqueued;
  friend bool operator==(const remote_access_plan&, const remote_access_plan&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, remote_access_plan& x) {
  return f(x.regions, x.device, x.mode, x.policy, x.reply_when);
}

/// What a remote prefetch / discard / advise did (the wire form of `op_result`).
struct remote_op_result {
  std::uint64_t ranges = 0;
  std::uint64_t bytes = 0;
  bool completed = false;
  std::uint64_t backend_ranges = 0;
  friend bool operator==(const remote_op_result&, const remote_op_result&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, remote_op_result& x) {
  return f(x.ranges, x.bytes, x.completed, x.backend_ranges);
}

/// `op_result` in wire form.
[[nodiscard]] remote_op_result to_remote(const op_result& r);

/// The wire form of `range_attributes`: CAF 0.17 serializes no `std::optional`, so each optional
/// location travels as a flag and a value.
struct remote_attributes {
  bool read_mostly = false;
  bool has_preferred_location = false;
  location preferred_location = location::host();
  std::vector<location> accessed_by{};
  bool has_last_prefetch_location = false;
  location last_prefetch_location = location::host();
  friend bool operator==(const remote_attributes&, const remote_attributes&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, remote_attributes& x) {
  return f(x.read_mostly, x.has_preferred_location, x.preferred_location, x.accessed_by,
           x.has_last_prefetch_location, x.last_prefetch_location);
}

/// `range_attributes` in wire form, and back.
[[nodiscard]] remote_attributes to_remote(const range_attributes& a);
[[nodiscard]] range_attributes to_local(const remote_attributes& a);

/// One row of the serving node's region table.
struct remote_region_info {
  region_info region{};  ///< id, generation, bytes, label, attach, refs, pins, age
  /// The session whose lease holds the region; 0 when it was not allocated through the gateway.
  std::uint64_t session = 0;
  /// True when `attributes` were read: the gateway reads them for the regions it holds leases
  /// on (it needs a ref to ask); other regions report what `region` says and nothing more.
  bool attributes_known = false;
  remote_attributes attributes{};
  friend bool operator==(const remote_region_info&, const remote_region_info&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, remote_region_info& x) {
  return f(x.region, x.session, x.attributes_known, x.attributes);
}

/// Which rows of the region table a `regions` request wants: from index `start`, at most
/// `count` (0: the serving node's page size, which also caps any larger count).
struct region_page {
  std::uint64_t start = 0;
  std::uint32_t count = 0;
};

template <class Inspector>
auto inspect(Inspector& f, region_page& x) {
  return f(x.start, x.count);
}

/// One page of the region table: its rows (attributes read for these only) and how many rows
/// the table had when the page was cut.
struct remote_region_page {
  std::vector<remote_region_info> rows{};
  std::uint64_t total = 0;
  friend bool operator==(const remote_region_page&, const remote_region_page&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, remote_region_page& x) {
  return f(x.rows, x.total);
}

/// The `stats` reply of the remote interface: the current allocator incarnation's counters
/// (exactly what a local `stats` request replies) plus the supervisor's and the gateway's.
struct remote_stats {
  allocator_stats allocator{};
  std::uint64_t restarts = 0;  ///< allocator incarnations replaced by the supervisor
  supervisor_state supervisor = supervisor_state::running;  ///< where the supervisor stands
  std::uint64_t sessions = 0;                               ///< sessions open now
  std::uint64_t sessions_lost = 0;  ///< sessions ended because their peer went down
  std::uint64_t leases = 0;         ///< leases held for open sessions
  std::uint64_t leased_bytes = 0;   ///< bytes of those leases (region sizes, no padding)
  friend bool operator==(const remote_stats&, const remote_stats&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, remote_stats& x) {
  return f(x.allocator, x.restarts, x.supervisor, x.sessions, x.sessions_lost, x.leases,
           x.leased_bytes);
}

/// One region of a serving node's snapshot: `region_snapshot` in wire form (the optional last
/// prefetch travels as a flag and a value) and the session whose lease holds the region.
struct remote_region_snapshot {
  region_info info{};
  region_policy policy = region_policy::direct;
  std::string advice = "none";
  bool has_last_prefetch = false;
  location last_prefetch = location::host();
  /// The session whose lease holds the region; 0 when it was not allocated through the gateway.
  std::uint64_t session = 0;
  friend bool operator==(const remote_region_snapshot&, const remote_region_snapshot&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, remote_region_snapshot& x) {
  return f(x.info, x.policy, x.advice, x.has_last_prefetch, x.last_prefetch, x.session);
}

/// The `snapshot` reply of the remote interface (operator only): `allocator_snapshot` in wire
/// form, each region with the session that leases it.
struct remote_snapshot {
  std::int64_t taken_at_ns = 0;
  std::uint64_t generation = 0;
  std::string backend{};
  allocator_stats stats{};
  std::vector<remote_region_snapshot> regions{};  ///< sorted by id
  std::vector<allocator_event> events{};          ///< oldest first
  std::uint64_t events_dropped = 0;
  std::uint64_t event_capacity = 0;
  friend bool operator==(const remote_snapshot&, const remote_snapshot&) = default;
};

template <class Inspector>
auto inspect(Inspector& f, remote_snapshot& x) {
  return f(x.taken_at_ns, x.generation, x.backend, x.stats, x.regions, x.events, x.events_dropped,
           x.event_capacity);
}

/// `allocator_snapshot` in wire form (every session 0), and back (the sessions are dropped).
[[nodiscard]] remote_snapshot to_remote(const allocator_snapshot& s);
[[nodiscard]] allocator_snapshot to_local(const remote_snapshot& s);

}  // namespace uma
