#include <uma/actors/supervision.hpp>

#include <algorithm>

#include <caf/exit_reason.hpp>

#include <uma/messages/error_category.hpp>

namespace uma {

std::string_view to_string(supervisor_decision d) noexcept {
  switch (d) {
    case supervisor_decision::resume:
      return "resume";
    case supervisor_decision::restart:
      return "restart";
    case supervisor_decision::stop:
      return "stop";
    case supervisor_decision::escalate:
      return "escalate";
  }
  return "escalate";
}

supervisor_decision default_decider(const caf::error& reason) noexcept {
  if (!reason || reason == caf::exit_reason::normal || reason == caf::exit_reason::user_shutdown)
    return supervisor_decision::stop;
  if (reason.category() != error_category)
    return supervisor_decision::escalate;
  switch (static_cast<errc>(reason.code())) {
    case errc::context_lost:
      return supervisor_decision::restart;
    case errc::out_of_memory:
      return supervisor_decision::resume;
    case errc::unrecoverable:
      return supervisor_decision::stop;
    default:
      return supervisor_decision::escalate;
  }
}

std::optional<std::chrono::milliseconds> restart_window::admit(time_point now) {
  while (!times_.empty() && now - times_.front() > within_)
    times_.pop_front();
  if (times_.size() >= max_restarts_)
    return std::nullopt;
  times_.push_back(now);
  auto delay = backoff_initial_;
  for (std::size_t k = 1; k < times_.size() && delay < backoff_max_; ++k)
    delay *= 2;
  return std::min(delay, backoff_max_);
}

std::string restart_window::exceeded() const {
  return "restart intensity exceeded: " + std::to_string(times_.size()) + " restarts within " +
         std::to_string(within_.count()) + " ms";
}

}  // namespace uma
