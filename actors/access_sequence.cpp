#include <uma/actors/access_sequence.hpp>

#include <string>
#include <utility>

#include <uma/sys/log.hpp>

namespace uma {

namespace {

void add(residency_result& sum, const residency_result& r) noexcept {
  sum.to_device_bytes += r.to_device_bytes;
  sum.to_host_bytes += r.to_host_bytes;
  sum.dropped_bytes += r.dropped_bytes;
  sum.discarded_bytes += r.discarded_bytes;
  sum.mapped_bytes += r.mapped_bytes;
  sum.placements += r.placements;
  sum.evictions += r.evictions;
}

}  // namespace

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
  auto r = client_.will_access(s.refs, s.device, s.mode, s.policy, s.stream);
  held_[step] = true;
  return r;
}

void access_sequence::end(std::size_t step) {
  if (!held_[step])
    return;
  held_[step] = false;
  (void)client_.done_with(steps_[step].refs);
}

residency_result access_sequence::begin(std::size_t i) {
  const auto step = i % steps_.size();
  if (current_ && *current_ != step)
    end(*current_);  // its regions may be evicted for what comes next
  current_ = step;
  residency_result out;
  if (!held_[step])
    add(out, issue(step));
  const auto next = (step + 1) % steps_.size();
  if (next != step && !held_[next]) {
    try {
      add(out, issue(next));
      ++ahead_;
    } catch (const error& e) {
      if (e.code() != errc::quota_exceeded)
        throw;
      ++refused_ahead_;  // the budget holds one step at a time: it is issued at its own step
    }
  }
  return out;
}

void access_sequence::finish() {
  for (std::size_t step = 0; step < steps_.size(); ++step)
    end(step);
  current_.reset();
}

}  // namespace uma
