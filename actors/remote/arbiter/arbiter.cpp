// The serving node's arbiter: its book under one lock, grants sent to the members' streams,
// deadlines watched by one thread (actors/remote/arbiter/arbiter.hpp).

#include <uma/actors/remote/arbiter/arbiter.hpp>

#include <algorithm>
#include <sstream>

#include <uma/sys/error.hpp>

#include <uma/actors/remote/arbiter/detail/arbiter_book.hpp>

namespace uma {

namespace {

using clock = std::chrono::steady_clock;

/// `text` as a Prometheus label value.
std::string label(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\' || c == '"')
      out += '\\';
    if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

detail::arbiter_settings settings_of(const arbiter_config& c) {
  return {c.totals, c.evict_deadline, 1024};
}

}  // namespace

arbiter::arbiter(arbiter_config config)
    : config_(std::move(config)),
      book_(std::make_unique<detail::arbiter_book>(settings_of(config_), clock::now())) {
  for (const auto& [tenant, device, policy] : config_.policies)
    book_->set_policy(tenant, device, policy, clock::now());
  static_cast<void>(book_->take_grants());
  deadlines_ = std::thread([this] { watch_deadlines(); });
}

arbiter::~arbiter() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  deadlines_.join();
}

void arbiter::dispatch() {
  for (auto& g : book_->take_grants()) {
    if (config_.log)
      config_.log("arbiter: member " + std::to_string(g.member) + " device " +
                  std::to_string(g.device) + ": " + std::to_string(g.budget_bytes) + " bytes" +
                  (g.revoked  ? " (revoked)"
                   : g.shrink ? " (shrink)"
                              : "") +
                  ": " + g.why);
    if (auto it = sinks_.find(g.member); it != sinks_.end())
      it->second.sink->send(g);
  }
  wake_.notify_all();  // a new deadline may be earlier
}

std::uint64_t arbiter::join(const std::string& identity, const std::string& name,
                            std::vector<arbiter_claim> claims, std::shared_ptr<arbiter_sink> sink) {
  std::lock_guard lock(mutex_);
  const auto mine = std::ranges::count_if(
      sinks_, [&](const auto& entry) { return entry.second.identity == identity; });
  if (mine >= config_.max_members_per_identity)
    raise(errc::quota_exceeded, "join: " + identity + " has " + std::to_string(mine) +
                                    " members already, the most one identity may have");
  const auto id = book_->join(identity, name, std::move(claims), clock::now());
  sinks_.emplace(id, joined{identity, std::move(sink)});
  dispatch();
  return id;
}

void arbiter::leave(std::uint64_t member, const std::string& why) {
  std::lock_guard lock(mutex_);
  sinks_.erase(member);
  if (book_->is_member(member)) {
    book_->leave(member, why, clock::now());
    dispatch();
  }
}

void arbiter::demand(std::uint64_t member, const std::string& identity, int device,
                     std::uint64_t wanted, bool idle) {
  std::lock_guard lock(mutex_);
  book_->demand(member, identity, device, wanted, idle, clock::now());
  dispatch();
}

void arbiter::evicted(std::uint64_t member, const std::string& identity, int device,
                      std::uint64_t sequence, std::uint64_t resident) {
  std::lock_guard lock(mutex_);
  book_->evicted(member, identity, device, sequence, resident, clock::now());
  dispatch();
}

void arbiter::set_policy(const std::string& tenant, int device, arbiter_policy policy) {
  std::lock_guard lock(mutex_);
  book_->set_policy(tenant, device, policy, clock::now());
  dispatch();
}

void arbiter::set_total(int device, std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  book_->set_total(device, bytes, clock::now());
  dispatch();
}

arbiter_report arbiter::report(const std::string& identity) const {
  std::lock_guard lock(mutex_);
  return book_->report(identity);
}

void arbiter::watch_deadlines() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (const auto next = book_->next_deadline())
      wake_.wait_until(lock, *next);
    else
      wake_.wait(lock);
    if (stopping_)
      return;
    if (book_->expire(clock::now()) != 0)
      dispatch();
  }
}

std::string arbiter::prometheus_text() const {
  const auto r = [this] {
    std::lock_guard lock(mutex_);
    return book_->report({}, false);  // the state only: no copy of the ledger a scrape
  }();
  std::ostringstream out;
  out << "# HELP uma_arbiter_total_bytes A device's bytes the arbiter divides.\n"
         "# TYPE uma_arbiter_total_bytes gauge\n";
  for (const auto& d : r.devices)
    out << "uma_arbiter_total_bytes{device=\"" << d.device << "\"} " << d.total_bytes << '\n';
  out << "# HELP uma_arbiter_held_bytes Bytes the arbiter counts as taken on a device.\n"
         "# TYPE uma_arbiter_held_bytes gauge\n";
  for (const auto& d : r.devices)
    out << "uma_arbiter_held_bytes{device=\"" << d.device << "\"} " << d.held_bytes << '\n';
  const std::pair<const char*, std::uint64_t arbiter_member_row::*> gauges[] = {
      {"granted_bytes", &arbiter_member_row::granted_bytes},
      {"member_held_bytes", &arbiter_member_row::held_bytes},
      {"resident_bytes", &arbiter_member_row::resident_bytes},
      {"wanted_bytes", nullptr},
      {"shrunk_bytes", &arbiter_member_row::shrunk_bytes},
      {"grown_bytes", &arbiter_member_row::grown_bytes},
      {"shrinks", &arbiter_member_row::shrinks}};
  for (const auto& [name, field] : gauges) {
    out << "# TYPE uma_arbiter_" << name
        << (field == &arbiter_member_row::shrinks ? " counter\n" : " gauge\n");
    for (const auto& d : r.devices)
      for (const auto& m : d.members)
        out << "uma_arbiter_" << name << "{device=\"" << d.device << "\",member=\"" << m.member
            << "\",tenant=\"" << label(m.tenant) << "\",state=\"" << m.state << "\"} "
            << (field ? m.*field : m.claim.wanted_bytes) << '\n';
  }
  out << "# TYPE uma_arbiter_members gauge\numa_arbiter_members " << r.members << '\n'
      << "# TYPE uma_arbiter_revocations counter\numa_arbiter_revocations " << r.revocations
      << '\n';
  return out.str();
}

}  // namespace uma
