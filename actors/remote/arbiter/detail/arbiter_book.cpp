#include <uma/actors/remote/arbiter/detail/arbiter_book.hpp>

#include <algorithm>
#include <set>
#include <utility>

#include <uma/actors/remote/arbiter/detail/arbiter_checks.hpp>
#include <uma/actors/remote/arbiter/detail/budget_division.hpp>
#include <uma/sys/error.hpp>

namespace uma::detail {
namespace {

using std::to_string;
using std::chrono::milliseconds;

constexpr std::uint64_t page_bytes = 4096;

/// The minimums of the members (revoked ones hold nothing) that claimed `device`, together.
template <class Members>
std::uint64_t minimums_on(const Members& members, int device) {
  std::uint64_t sum = 0;
  for (const auto& [id, m] : members) {
    const auto it = m.shares.find(device);
    if (!m.revoked && it != m.shares.end())
      sum += it->second.claim.min_bytes;
  }
  return sum;
}

/// The share of `m` on `device`, or invalid_argument when it did not claim the device.
template <class Member>
auto& claimed(Member& m, std::uint64_t id, int device, const std::string& what) {
  const auto it = m.shares.find(device);
  if (it == m.shares.end())
    raise(errc::invalid_argument,
          what + ": " + member_name(id, m.tenant) + " did not claim device " + to_string(device));
  return it->second;
}

template <class Member, class Share>
arbiter_member_row row_of(std::uint64_t id, const Member& m, const Share& s) {
  arbiter_member_row row;
  row.member = id;
  row.tenant = m.tenant;
  row.claim = s.claim;
  row.granted_bytes = s.granted;
  row.held_bytes = s.held;
  row.resident_bytes = s.resident;
  row.state = m.revoked                ? "revoked"
              : s.shrink_sequence != 0 ? "shrinking"
              : s.claim.idle           ? "idle"
                                       : "active";
  row.grown_bytes = s.grown;
  row.shrunk_bytes = s.shrunk;
  row.shrinks = s.shrinks;
  row.slowest_shrink = s.slowest;
  return row;
}

void keep(std::deque<arbiter_decision>& ledger, std::size_t length, arbiter_decision d) {
  ledger.push_back(std::move(d));
  while (ledger.size() > length)
    ledger.pop_front();
}

}  // namespace

arbiter_book::arbiter_book(arbiter_settings settings, time_point now)
    : settings_(std::move(settings)), start_(now) {
  for (const auto& [device, total] : settings_.totals) {
    if (device < 0)
      raise(errc::invalid_argument, "arbiter: device " + to_string(device) + " is not a device");
    if (total == 0)
      raise(errc::invalid_argument,
            "arbiter: device " + to_string(device) + " has a total of 0 bytes to divide");
  }
  if (settings_.evict_deadline <= milliseconds{0})
    raise(errc::invalid_argument, "arbiter: an eviction deadline of " +
                                      to_string(settings_.evict_deadline.count()) +
                                      " ms leaves a member no time to evict");
}

void arbiter_book::check_claim(const std::string& tenant, const arbiter_claim& c) const {
  const auto total = settings_.totals.find(c.device);
  const auto policy = policies_.find({tenant, c.device});
  detail::check_claim(
      tenant, c,
      total == settings_.totals.end() ? std::nullopt : std::optional<std::uint64_t>(total->second),
      policy == policies_.end() ? arbiter_policy{} : policy->second);
}

std::uint64_t arbiter_book::join(const std::string& identity, const std::string& name,
                                 std::vector<arbiter_claim> claims, time_point now) {
  check_name("join: member of '" + identity + "'", name);
  const auto tenant = identity + "/" + name;
  if (claims.empty())
    raise(errc::invalid_argument, "join: member '" + tenant + "' claims no device");
  std::set<int> seen;
  for (const auto& c : claims) {
    if (!seen.insert(c.device).second)
      raise(errc::invalid_argument,
            "join: member '" + tenant + "' claims device " + to_string(c.device) + " twice");
    check_claim(tenant, c);
    const auto total = settings_.totals.at(c.device);
    const auto others = minimums_on(members_, c.device);
    if (c.min_bytes > total - std::min(others, total))
      raise(errc::quota_exceeded, "join: member '" + tenant + "' asks a minimum of " +
                                      to_string(c.min_bytes) + " bytes on device " +
                                      to_string(c.device) + ", but the members' minimums take " +
                                      to_string(others) + " of its " + to_string(total) + " bytes");
  }
  const auto id = next_member_++;
  auto& m = members_[id];
  m.identity = identity;
  m.tenant = tenant;
  for (const auto& c : claims)
    m.shares[c.device].claim = c;
  for (const auto& c : claims) {
    const auto why = member_name(id, tenant) + " joined with priority " + to_string(c.priority);
    const auto first = outbox_.size();
    rebalance_device(c.device, why, now);
    const bool told = std::any_of(outbox_.begin() + first, outbox_.end(), [&](const auto& g) {
      return g.member == id && g.device == c.device;
    });
    if (told)
      continue;
    // Its first grant is always sent, 0 bytes too: the member learns its starting budget.
    ++m.sequence;
    outbox_.insert(outbox_.begin() + first,
                   arbiter_grant{id, c.device, 0, m.sequence, false, false, milliseconds{0}, why});
    note(id, m, c.device, 0, 0, why, now);
  }
  return id;
}

arbiter_book::member& arbiter_book::owned(std::uint64_t id, const std::string& identity,
                                          const char* what) {
  const auto it = members_.find(id);
  if (it == members_.end() || it->second.identity != identity)
    raise(errc::invalid_argument, std::string{what} + ": member " + to_string(id) +
                                      " is not a member of '" + identity + "'");
  if (it->second.revoked)
    raise(errc::invalid_argument, std::string{what} + ": " + member_name(id, it->second.tenant) +
                                      " was revoked: its requests are refused until it leaves");
  return it->second;
}

void arbiter_book::demand(std::uint64_t id, const std::string& identity, int device,
                          std::uint64_t wanted, bool idle, time_point now) {
  auto& m = owned(id, identity, "demand");
  auto& s = claimed(m, id, device, "demand");
  const auto total = settings_.totals.at(device);
  if (wanted < s.claim.min_bytes || wanted > total)
    raise(errc::invalid_argument, "demand: " + member_name(id, m.tenant) + " wants " +
                                      to_string(wanted) + " bytes on device " + to_string(device) +
                                      ", outside its minimum of " + to_string(s.claim.min_bytes) +
                                      " and the total of " + to_string(total) + " bytes");
  s.claim.wanted_bytes = wanted;
  s.claim.idle = idle;
  rebalance_device(device,
                   member_name(id, m.tenant) +
                       (idle ? " is idle" : " wants " + to_string(wanted) + " bytes") +
                       " on device " + to_string(device),
                   now);
}

void arbiter_book::evicted(std::uint64_t id, const std::string& identity, int device,
                           std::uint64_t sequence, std::uint64_t resident, time_point now) {
  auto& m = owned(id, identity, "evicted");
  auto& s = claimed(m, id, device, "evicted");
  if (sequence == 0 || sequence > m.sequence)
    raise(errc::invalid_argument,
          "evicted: " + member_name(id, m.tenant) + " acknowledges grant " + to_string(sequence) +
              ", but the grants it was sent are 1 to " + to_string(m.sequence));
  s.resident = resident;
  if (s.shrink_sequence == 0 || sequence < s.shrink_sequence)
    return;  // nothing waits for this acknowledgement
  const auto old_held = s.held;
  s.held = std::max(s.granted, std::min(resident, s.held));
  s.shrunk += old_held - s.held;
  auto why = member_name(id, m.tenant) + " evicted to " + to_string(resident) +
             " bytes on device " + to_string(device);
  if (resident <= s.granted) {
    const auto took = std::chrono::duration_cast<milliseconds>(now - s.shrink_sent);
    s.shrink_sequence = 0;
    ++s.shrinks;
    s.slowest = std::max(s.slowest, took);
    why += " in " + to_string(took.count()) + " ms";
  }
  note(id, m, device, old_held, s.held, why, now);
  rebalance_device(device, why, now);
}

void arbiter_book::leave(std::uint64_t id, const std::string& why, time_point now) {
  const auto it = members_.find(id);
  if (it == members_.end())
    return;  // gone already (revoked and left, or a second report of one connection's end)
  const member m = std::move(it->second);
  members_.erase(it);
  const auto left = member_name(id, m.tenant) + " left: " + why;
  for (const auto& [device, s] : m.shares)
    note(id, m, device, s.held, 0, left + "; " + to_string(s.held) + " bytes free", now);
  for (const auto& [device, s] : m.shares)
    rebalance_device(device, left, now);
}

void arbiter_book::set_policy(const std::string& tenant, int device, arbiter_policy policy,
                              time_point now) {
  const auto what = "set_policy: tenant '" + tenant + "'";
  if (identity_of(tenant).empty())
    raise(errc::invalid_argument, what + " is not '<identity>/<name>'");
  check_name(what, tenant.substr(tenant.rfind('/') + 1));
  const auto total = settings_.totals.find(device);
  if (total == settings_.totals.end())
    raise(errc::invalid_argument,
          what + ": device " + to_string(device) + " is not divided by the arbiter");
  check_weight(what, device, policy.weight);
  if (policy.min_bytes > total->second)
    raise(errc::invalid_argument,
          what + " is given a minimum of " + to_string(policy.min_bytes) + " bytes on device " +
              to_string(device) + ", above its total of " + to_string(total->second) + " bytes");
  // The operator's word on priority and weight is final for the members there now; a minimum is
  // only capped (one a member did not ask for is not imposed), so those admitted still fit.
  policies_[{tenant, device}] = policy;
  for (auto& [id, m] : members_) {
    const auto it = m.shares.find(device);
    if (m.tenant != tenant || it == m.shares.end())
      continue;
    auto& c = it->second.claim;
    c.min_bytes = std::min(c.min_bytes, policy.min_bytes);
    c.priority = policy.priority;
    c.weight = policy.weight;
  }
  const auto why = "policy of '" + tenant + "' on device " + to_string(device) + ": minimum " +
                   to_string(policy.min_bytes) + " bytes, priority " + to_string(policy.priority) +
                   ", weight " + to_string(policy.weight);
  keep(ledger_, settings_.ledger_length,
       arbiter_decision{std::chrono::duration_cast<milliseconds>(now - start_), 0, tenant, device,
                        0, 0, why});
  rebalance_device(device, why, now);
}

void arbiter_book::set_total(int device, std::uint64_t bytes, time_point now) {
  const auto it = settings_.totals.find(device);
  if (it == settings_.totals.end())
    raise(errc::invalid_argument,
          "set_total: device " + to_string(device) + " is not divided by the arbiter");
  if (bytes < page_bytes)
    raise(errc::invalid_argument, "set_total: " + to_string(bytes) + " bytes on device " +
                                      to_string(device) + " is less than a page of 4096 bytes");
  const auto minimums = minimums_on(members_, device);
  if (bytes < minimums)
    raise(errc::quota_exceeded, "set_total: " + to_string(bytes) + " bytes on device " +
                                    to_string(device) + " is below the members' minimums, " +
                                    to_string(minimums) + " bytes together");
  const auto why = "device " + to_string(device) + "'s total is now " + to_string(bytes) +
                   " bytes (was " + to_string(it->second) + ")";
  keep(ledger_, settings_.ledger_length,
       arbiter_decision{std::chrono::duration_cast<milliseconds>(now - start_),
                        0,
                        {},
                        device,
                        it->second,
                        bytes,
                        why});
  it->second = bytes;
  rebalance_device(device, why, now);
}

std::size_t arbiter_book::expire(time_point now) {
  std::size_t revoked = 0;
  for (auto& [id, m] : members_) {
    if (m.revoked)
      continue;
    const auto late = std::find_if(m.shares.begin(), m.shares.end(), [&](const auto& e) {
      return e.second.shrink_sequence != 0 && e.second.deadline <= now;
    });
    if (late == m.shares.end())
      continue;
    const auto why = member_name(id, m.tenant) + " did not evict to " +
                     to_string(late->second.granted) + " bytes on device " +
                     to_string(late->first) + " within " +
                     to_string(settings_.evict_deadline.count()) + " ms: every grant revoked";
    revoke(id, m, why, now);
    ++revoked;
    for (const auto& [device, s] : m.shares)
      rebalance_device(device, why, now);
  }
  return revoked;
}

std::optional<arbiter_book::time_point> arbiter_book::next_deadline() const {
  std::optional<time_point> next;
  for (const auto& [id, m] : members_)
    for (const auto& [device, s] : m.shares)
      if (!m.revoked && s.shrink_sequence != 0 && (!next || s.deadline < *next))
        next = s.deadline;
  return next;
}

std::vector<arbiter_grant> arbiter_book::take_grants() {
  std::vector<arbiter_grant> out;
  out.swap(outbox_);
  return out;
}

arbiter_report arbiter_book::report(const std::string& identity, bool with_ledger) const {
  arbiter_report r;
  for (const auto& [device, total] : settings_.totals) {
    arbiter_device_row row{device, total, 0, {}};
    for (const auto& [id, m] : members_) {
      const auto it = m.shares.find(device);
      if (it == m.shares.end())
        continue;
      row.held_bytes += it->second.held;
      if (identity.empty() || m.identity == identity)
        row.members.push_back(row_of(id, m, it->second));
    }
    r.devices.push_back(std::move(row));
  }
  for (const auto& [id, m] : members_)
    r.members += identity.empty() || m.identity == identity ? 1 : 0;
  for (const auto& d : ledger_)
    if (with_ledger &&
        (identity.empty() || (!d.tenant.empty() && identity_of(d.tenant) == identity)))
      r.decisions.push_back(d);
  r.revocations = revocations_;
  return r;
}

void arbiter_book::rebalance(const std::string& why, time_point now) {
  for (const auto& [device, total] : settings_.totals)
    rebalance_device(device, why, now);
}

void arbiter_book::rebalance_device(int device, const std::string& why, time_point now) {
  std::vector<std::pair<std::uint64_t, member*>> who;  // in id order, as the division sees them
  std::vector<arbiter_claim> claims;
  for (auto& [id, m] : members_) {
    const auto it = m.shares.find(device);
    if (!m.revoked && it != m.shares.end()) {
      who.emplace_back(id, &m);
      claims.push_back(it->second.claim);
    }
  }
  const auto targets = divide_budget(settings_.totals.at(device), claims);
  for (std::size_t i = 0; i < who.size(); ++i)
    if (targets[i] < who[i].second->shares.at(device).granted)
      grant(who[i].first, *who[i].second, device, targets[i], why, now);
  grow(device, who, targets, why, now);
}

void arbiter_book::grow(int device, const std::vector<std::pair<std::uint64_t, member*>>& who,
                        const std::vector<std::uint64_t>& targets, const std::string& why,
                        time_point now) {
  std::uint64_t held = 0;
  for (const auto& [id, m] : members_) {
    const auto it = m.shares.find(device);
    held += it == m.shares.end() ? 0 : it->second.held;
  }
  const auto total = settings_.totals.at(device);
  auto free = total > held ? total - held : 0;  // a lowered total may leave less than is held
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < who.size(); ++i)
    if (targets[i] > who[i].second->shares.at(device).granted)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return who[a].second->shares.at(device).claim.priority >
           who[b].second->shares.at(device).claim.priority;
  });
  for (auto i : order) {
    auto& s = who[i].second->shares.at(device);
    auto to = targets[i];
    if (to > s.held) {  // above what it holds: only out of the free bytes
      auto add = std::min(to - s.held, free);
      if (add < to - s.held)
        add = add / page_bytes * page_bytes;
      to = s.held + add;
      free -= add;
    }
    if (to <= s.granted)
      continue;
    grant(who[i].first, *who[i].second, device, to, why, now);
    if (to >= s.held) {  // a shrink still waiting is moot: the member may keep all it holds
      s.held = to;
      s.shrink_sequence = 0;
    }
  }
}

void arbiter_book::grant(std::uint64_t id, member& m, int device, std::uint64_t bytes,
                         const std::string& why, time_point now) {
  auto& s = m.shares.at(device);
  const auto from = s.granted;
  const bool shrink = bytes < from;
  ++m.sequence;
  s.granted = bytes;
  if (shrink) {
    // A shrink sent while another waits keeps the first one's deadline: a member cannot put its
    // deadline off by making the arbiter shrink it again (its own demands can).
    if (s.shrink_sequence == 0) {
      s.shrink_sent = now;
      s.deadline = now + settings_.evict_deadline;
    }
    s.shrink_sequence = m.sequence;
  } else {
    s.grown += bytes - from;
  }
  outbox_.push_back(arbiter_grant{id, device, bytes, m.sequence, shrink, false,
                                  shrink ? settings_.evict_deadline : milliseconds{0}, why});
  note(id, m, device, from, bytes, why, now);
}

void arbiter_book::revoke(std::uint64_t id, member& m, const std::string& why, time_point now) {
  for (auto& [device, s] : m.shares) {
    const auto from = s.held;
    s.granted = 0;
    s.held = 0;
    s.shrink_sequence = 0;
    ++m.sequence;
    outbox_.push_back(arbiter_grant{id, device, 0, m.sequence, false, true, milliseconds{0}, why});
    note(id, m, device, from, 0, why, now);
  }
  m.revoked = true;
  ++revocations_;
}

void arbiter_book::note(std::uint64_t id, const member& m, int device, std::uint64_t from,
                        std::uint64_t to, const std::string& why, time_point now) {
  keep(ledger_, settings_.ledger_length,
       arbiter_decision{std::chrono::duration_cast<milliseconds>(now - start_), id, m.tenant,
                        device, from, to, why});
}

}  // namespace uma::detail
