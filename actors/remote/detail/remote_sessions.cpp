#include <uma/actors/remote/detail/remote_sessions.hpp>

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include <caf/actor.hpp>
#include <caf/actor_addr.hpp>
#include <caf/actor_system.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/system_messages.hpp>

#include <uma/messages/error_category.hpp>

namespace uma::detail {

session::session(const caf::actor& peer_, const session_key& key, std::string tenant_,
                 std::shared_ptr<lease_totals> tenant_leases_)
    : peer(peer_.address()),
      node(peer_.node()),
      tenant(std::move(tenant_)),
      secret_hi(key.secret_hi),
      secret_lo(key.secret_lo),
      tenant_leases(tenant_leases_),
      leases(std::move(tenant_leases_)),
      last_used(std::chrono::steady_clock::now()) {}

caf::error relay_error(caf::actor_system& sys, caf::error err) {
  if (err.category() == error_category)
    return err;
  return make_caf_error(
      errc::allocator_stopped,
      "the serving node's allocator supervisor did not answer (" + sys.render(err) + ")");
}

std::vector<std::uint64_t> idle_sessions(const std::map<std::uint64_t, session>& sessions,
                                         std::chrono::milliseconds timeout) {
  std::vector<std::uint64_t> out;
  if (timeout.count() <= 0)
    return out;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [sid, s] : sessions)
    if (s.in_flight == 0 && now - s.last_used > timeout)
      out.push_back(sid);
  return out;
}

std::size_t sessions_of(const std::map<std::uint64_t, session>& sessions,
                        const std::string& tenant) {
  std::size_t n = 0;
  for (const auto& [sid, s] : sessions)
    n += s.tenant == tenant ? 1 : 0;
  return n;
}

std::string tenant_of(const session& s) {
  return s.tenant;
}

bool session::has_secret(const session_key& key) const noexcept {
  return ((secret_hi ^ key.secret_hi) | (secret_lo ^ key.secret_lo)) == 0;
}

void random_secret(std::uint64_t& hi, std::uint64_t& lo) {
  std::uint64_t words[2] = {};
  auto* out = reinterpret_cast<unsigned char*>(words);
  std::size_t got = 0;
  while (got < sizeof words) {
    const auto n = getrandom(out + got, sizeof words - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      raise(errc::backend_error, std::string("getrandom failed: ") + std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
  hi = words[0];
  lo = words[1];
}

operator_key random_operator_key() {
  operator_key k;
  while (k.empty())
    random_secret(k.secret_hi, k.secret_lo);
  return k;
}

bool operator_key_matches(const operator_key& configured, const operator_key& given) noexcept {
  const auto diff =
      (configured.secret_hi ^ given.secret_hi) | (configured.secret_lo ^ given.secret_lo);
  return !configured.empty() && diff == 0;
}

namespace {

/// The most padding `r`'s alignment may add (the allocator's quota charges it).
[[nodiscard]] std::uint64_t padding_bound(const remote_allocate_request& r) {
  return r.alignment > 1 ? r.alignment - 1 : 0;
}

}  // namespace

std::optional<std::uint64_t> admission_charge(const remote_allocate_request& r) {
  const auto region = checked_add(r.bytes, padding_bound(r));
  return region ? checked_add(*region, r.label.size()) : std::nullopt;
}

/// Why `s` may not allocate `r` now (limits of the session and its tenant); nullopt if it may.
std::optional<refusal> admit(const session& s, const remote_allocate_request& r,
                             const gateway_config& config_, std::uint64_t ceiling_) {
  if (auto bad = check_allocate(r, config_.max_label_bytes))
    return bad;
  const auto padding = padding_bound(r);
  const auto region = checked_add(r.bytes, padding);
  if (!region)
    return overflow_refusal("allocate: bytes + alignment padding", r.bytes, padding);
  const auto charge = admission_charge(r);
  if (!charge)
    return overflow_refusal("allocate: bytes + label bytes", *region, r.label.size());
  if (ceiling_ != 0 && *charge > ceiling_)
    return refusal{
        errc::quota_exceeded,
        "allocate: " + std::to_string(r.bytes) + " bytes plus a label of " +
            std::to_string(r.label.size()) + " bytes" +
            (padding != 0 ? " and up to " + std::to_string(padding) + " bytes of alignment padding"
                          : std::string{}) +
            " exceed the serving node's quota ceiling of " + std::to_string(ceiling_) + " bytes"};
  if (s.leases.size() + s.in_flight >= config_.max_leases_per_session)
    return refusal{errc::quota_exceeded,
                   "allocate: the session holds " + std::to_string(s.leases.size()) +
                       " leases and has " + std::to_string(s.in_flight) +
                       " requests in flight; the cap is " +
                       std::to_string(config_.max_leases_per_session) + " leases"};
  if (config_.tenant_quota_bytes == 0)
    return std::nullopt;
  const std::uint64_t used = s.tenant_leases->charged();
  const auto total = checked_add(used, *charge);
  if (!total || *total > config_.tenant_quota_bytes)
    return refusal{errc::quota_exceeded,
                   "allocate: the tenant (" + s.tenant + ") holds " + std::to_string(used) +
                       " bytes; " + std::to_string(*charge) +
                       " more (region, alignment padding and label) would exceed the tenant "
                       "quota of " +
                       std::to_string(config_.tenant_quota_bytes) + " bytes"};
  return std::nullopt;
}

/// Why `peer` cannot be a session's actor when `sender` asks; nullopt when it can.
std::optional<std::string> refuse_peer(const caf::actor& peer, const caf::strong_actor_ptr& sender,
                                       const caf::actor_addr& gateway,
                                       const caf::actor_addr& supervisor) {
  if (!peer)
    return "no actor given; a session needs an actor of the peer's process for the gateway "
           "to monitor";
  if (sender == nullptr)
    return "an anonymous request cannot open a session";
  if (peer.address() == gateway || peer.address() == supervisor)
    return "the actor given is the serving node's own " +
           std::string(peer.address() == gateway ? "gateway" : "allocator supervisor") +
           "; a session's actor must be one of the requesting peer";
  if (peer.node() != sender->node())
    return "the actor given lives on node " + caf::to_string(peer.node()) +
           ", not on the requesting peer's node " + caf::to_string(sender->node());
  return std::nullopt;
}

/// The refs of `handles`, all leased by session `s` and alive; or why not.
std::optional<lookup_failure> resolve(const session& s, std::uint64_t sid,
                                      const std::vector<region_handle>& handles, const char* op,
                                      std::vector<byte_ref>& refs) {
  if (auto miss = s.leases.resolve(handles, refs))
    return lookup_failure{op, sid, false, std::move(*miss)};
  return std::nullopt;
}

std::optional<std::string> refused_system_message(const caf::mailbox_element& x,
                                                  const caf::node_id& here,
                                                  caf::actor_system& sys) {
  const auto& msg = x.content();
  const auto& from = x.sender;
  const std::string who = from ? "actor " + caf::to_string(from) : "an anonymous sender";
  if (msg.match_elements<caf::exit_msg>()) {
    if (from != nullptr && from->node() == here)
      return std::nullopt;
    return "ignored an exit message (" + sys.render(msg.get_as<caf::exit_msg>(0).reason) +
           ") from " + who;
  }
  if (msg.match_elements<caf::down_msg>()) {
    const auto& dm = msg.get_as<caf::down_msg>(0);
    if (from != nullptr && from->address() == dm.source)
      return std::nullopt;
    return "ignored a down message naming " + to_string(dm.source) + " from " + who;
  }
  if (!msg.empty() && msg.match_element<caf::link_atom>(0) && from != nullptr &&
      from->node() != here)
    return "refused a link from remote " + who;
  return std::nullopt;
}

leased_map live_leases(const std::map<std::uint64_t, session>& sessions) {
  leased_map out;
  for (const auto& [sid, s] : sessions)
    s.leases.for_each_live([&out, sid = sid](const region_handle& h, const byte_ref& ref) {
      out.emplace(h, std::pair(sid, ref));
    });
  return out;
}

std::vector<remote_region_info> report_rows(std::vector<region_info> rows,
                                            const leased_map& leased) {
  std::vector<remote_region_info> out;
  out.reserve(rows.size());
  for (auto& row : rows) {
    auto it = leased.find({row.id, row.generation});
    out.push_back({std::move(row)});
    if (it != leased.end())
      out.back().session = it->second.first;
  }
  return out;
}

void count_leases(remote_stats& out, const std::map<std::uint64_t, session>& sessions,
                  const lease_totals& all) {
  out.sessions = sessions.size();
  out.leases = all.leases();
  out.leased_bytes = all.held_bytes();
}

remote_snapshot with_sessions(const allocator_snapshot& s,
                              const std::map<std::uint64_t, session>& sessions) {
  const auto leased = live_leases(sessions);
  auto out = to_remote(s);
  for (auto& r : out.regions)
    if (auto it = leased.find({r.info.id, r.info.generation}); it != leased.end())
      r.session = it->second.first;
  return out;
}

remote_region_page cut_page(std::vector<remote_region_info> rows, region_page p,
                            std::uint32_t cap) {
  const std::uint64_t count = p.count == 0 ? cap : std::min(p.count, cap);
  remote_region_page out{{}, rows.size()};
  const auto first = std::min<std::uint64_t>(p.start, rows.size());
  const auto last = std::min<std::uint64_t>(rows.size(), first + count);
  out.rows.assign(std::make_move_iterator(rows.begin() + static_cast<std::ptrdiff_t>(first)),
                  std::make_move_iterator(rows.begin() + static_cast<std::ptrdiff_t>(last)));
  return out;
}

caf::error ipc_refusal(const region_handle& h) {
  return make_caf_error(errc::not_supported, ipc_refusal_message(h));
}

caf::error operator_refusal(const std::string& what) {
  return make_caf_error(errc::invalid_argument,
                        what +
                            " needs the serving node's operator key, and the key given (if "
                            "any) is not it; tenants act on their own sessions only");
}

caf::error lookup_failure::to_error(const supervision_stats* sv) const {
  const auto sid = std::to_string(session);
  if (no_session)
    // One message for "not open" and "not your key": a peer learns nothing about other sessions.
    return make_caf_error(errc::invalid_argument,
                          op + ": session " + sid +
                              " is not open (never opened, closed, or its peer went down) or the "
                              "key and node given are not the session's");
  const auto& [wanted, held_inert, same_id] = miss;
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
    return make_caf_error(errc::invalid_argument,
                          what + " names no allocator incarnation (generations start at 1)" + also);
  if (current != 0 && wanted.generation < current)
    return make_caf_error(errc::allocator_stopped, what + " is stale: " + now + also);
  if (current != 0 && wanted.generation > current)
    return make_caf_error(errc::invalid_argument, what + " does not exist: " + now + also);
  return make_caf_error(errc::invalid_argument, what + " is not leased by session " + sid + also);
}

}  // namespace uma::detail
