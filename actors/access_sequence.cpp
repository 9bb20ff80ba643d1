#include <uma/actors/access_sequence.hpp>

#include <string>
#include <utility>

#include <uma/sys/log.hpp>

namespace uma {

access_sequence::access_sequence(client& c, std::vector<access_step> steps)
    : client_(c), steps_(std::move(steps)), held_(steps_.size(), false) {
  if (steps_.empty())
    raise(errc::invalid_argument, "access_sequence: a sequence of no step");
  for (std::size_t i = 0; i < steps_.size(); ++i)
    if (steps_[i].refs.empty())
      raise(errc::invalid_argument, "access_sequence: step " + std::to_string(i) + " names no ref");
}

access_sequence::~access_sequence() {
  try {
    finish();
  } catch (const std::exception& e) {
    log(log_level::warning, std::string("access_sequence: ending its plans failed: ") + e.what());
  }
}

residency_result access_sequence::issue(std::size_t step) {
  const auto& s = steps_[step];
  auto r = client_.will_access(s.refs, s.device, s.mode, s.policy, s.stream, s.reply_when);
  held_[step] = true;
  return r;
}

std::optional<std::pair<std::size_t, residency_result>> access_sequence::collect_ahead() {
  if (!ahead_plan_)
    return std::nullopt;
  auto [step, plan] = std::move(*ahead_plan_);
  ahead_plan_.reset();
  try {
    auto r = plan.get();
    held_[step] = true;
    ++ahead_;
    return std::pair{step, r};
  } catch (const error& e) {
    if (e.code() != errc::quota_exceeded)
      throw;
    ++refused_ahead_;  // the budget holds one step at a time: it is issued at its own step
    return std::nullopt;
  }
}

void access_sequence::end(std::size_t step) {
  if (!held_[step])
    return;
  held_[step] = false;
  (void)client_.done_with(steps_[step].refs);
}

residency_result access_sequence::begin(std::size_t i) {
  const auto step = i % steps_.size();
  residency_result out;
  if (auto ahead = collect_ahead()) {
    if (ahead->first == step)
      out = ahead->second;
    else
      end(ahead->first);  // the caller jumped: the plan sent ahead is not wanted now
  }
  if (current_ && *current_ != step)
    end(*current_);  // its regions may be evicted for what comes next
  current_ = step;
  if (!held_[step])
    out = issue(step);
  const auto next = (step + 1) % steps_.size();
  if (next != step && !held_[next]) {
    const auto& s = steps_[next];
    ahead_plan_.emplace(next, client_.will_access_async(s.refs, s.device, s.mode, s.policy,
                                                        s.stream, s.reply_when));
  }
  return out;
}

void access_sequence::finish() {
  (void)collect_ahead();
  for (std::size_t step = 0; step < steps_.size(); ++step)
    end(step);
  current_.reset();
}

}  // namespace uma
