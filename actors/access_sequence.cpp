#include <uma/actors/access_sequence.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>

#include <uma/sys/log.hpp>

namespace uma {

access_sequence::access_sequence(client& c, std::vector<access_step> steps, std::size_t lookahead)
    : client_(c), steps_(std::move(steps)), lookahead_(lookahead), held_(steps_.size(), false) {
  if (steps_.empty())
    raise(errc::invalid_argument, "access_sequence: a sequence of no step");
  for (std::size_t i = 0; i < steps_.size(); ++i)
    if (steps_[i].refs.empty() && steps_[i].ranges.empty())
      raise(errc::invalid_argument,
            "access_sequence: step " + std::to_string(i) + " names no ref or range");
  std::unordered_set<std::uintptr_t> seen;  // the cycle's bytes: each ref's or range's once
  for (const auto& s : steps_) {
    for (const auto& ref : s.refs)
      if (seen.insert(reinterpret_cast<std::uintptr_t>(ref.range().ptr)).second)
        cycle_.bytes += ref.range().bytes;
    for (const auto& r : s.ranges)
      if (seen.insert(r.address).second)
        cycle_.bytes += r.bytes;
  }
  cycle_.plans = static_cast<std::uint32_t>(std::min<std::size_t>(steps_.size(), UINT32_MAX));
  if (lookahead_ >= steps_.size())
    raise(errc::invalid_argument, "access_sequence: a lookahead of " + std::to_string(lookahead_) +
                                      " steps in a sequence of " + std::to_string(steps_.size()) +
                                      " (at most " + std::to_string(steps_.size() - 1) + ")");
}

access_sequence::~access_sequence() {
  try {
    finish();
  } catch (const std::exception& e) {
    log(log_level::warning, std::string("access_sequence: ending its plans failed: ") + e.what());
  }
}

access_plan_request access_sequence::request_of(const access_step& s) const {
  return {s.refs, s.device, s.mode, s.policy, s.stream, s.reply_when, s.tenant, cycle_, s.ranges};
}

residency_result access_sequence::issue(std::size_t step) {
  const auto& s = steps_[step];
  auto r = client_.will_access(request_of(s));
  held_[step] = true;
  return r;
}

bool access_sequence::sent_ahead(std::size_t step) const noexcept {
  for (const auto& [s, plan] : in_flight_)
    if (s == step)
      return true;
  return false;
}

std::optional<residency_result> access_sequence::collect_until(std::size_t step) {
  const bool wanted = sent_ahead(step);
  std::optional<residency_result> out;
  while (!in_flight_.empty()) {
    auto [s, plan] = std::move(in_flight_.front());
    in_flight_.pop_front();
    try {
      auto r = plan.get();
      held_[s] = true;
      ++ahead_;
      if (s == step)
        out = r;
    } catch (const error& e) {
      if (e.code() != errc::quota_exceeded)
        throw;
      ++refused_ahead_;  // no room yet: sent again later, or issued at its own step
    }
    if (wanted && s == step)
      break;
  }
  return out;
}

void access_sequence::end(std::size_t step) {
  if (!held_[step])
    return;
  held_[step] = false;
  if (!steps_[step].refs.empty())
    (void)client_.done_with(steps_[step].refs);
  if (!steps_[step].ranges.empty())
    (void)client_.done_with(steps_[step].ranges);
}

residency_result access_sequence::begin(std::size_t i) {
  const std::size_t n = steps_.size();
  const auto step = i % n;
  auto out = collect_until(step);
  if (current_ && *current_ != step)
    end(*current_);  // its regions may be evicted for what comes next
  current_ = step;
  if (!held_[step]) {
    for (std::size_t k = 0; k < n; ++k)  // steps held ahead of a refused one make room for it
      if (k != step && held_[k] && !sent_ahead(k))
        end(k);
    out = issue(step);
  }
  for (std::size_t d = 1; d <= lookahead_; ++d) {
    const auto next = (step + d) % n;
    if (held_[next] || sent_ahead(next))
      continue;
    const auto& s = steps_[next];
    in_flight_.emplace_back(next, client_.will_access_async(request_of(s)));
  }
  return out ? *out : residency_result{};
}

void access_sequence::finish() {
  (void)collect_until(steps_.size());  // every plan in flight
  for (std::size_t step = 0; step < steps_.size(); ++step)
    end(step);
  current_.reset();
}

}  // namespace uma
