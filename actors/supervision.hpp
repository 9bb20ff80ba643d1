#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <caf/fwd.hpp>

#include <uma/actors/allocator_config.hpp>

namespace uma {

/// What a supervisor does about a failed allocator incarnation.
enum class supervisor_decision : std::uint8_t {
  resume,    ///< the failure is the request's, not the allocator's: keep going
  restart,   ///< replace the incarnation (a new generation), after a backoff
  stop,      ///< stay down: later requests get allocator_stopped
  escalate,  ///< the supervisor itself exits with a reason naming the failure
};

/// "resume", "restart", "stop", "escalate".
[[nodiscard]] std::string_view to_string(supervisor_decision d) noexcept;

/// The default decision table, keyed by error type (the uma code), never by message text:
/// context_lost -> restart; out_of_memory -> resume; unrecoverable -> stop; normal exits ->
/// stop; anything else (other uma codes, CAF errors, crashes) -> escalate.
[[nodiscard]] supervisor_decision default_decider(const caf::error& reason) noexcept;

/// How a supervisor runs its allocator.
struct supervisor_config {
  /// Template for each incarnation. The supervisor sets `generation`; it wraps `on_stop`, which
  /// still runs, after the supervisor's per-generation record, at the end of every post_stop.
  allocator_config allocator{};
  /// At most this many restarts within `within`; one more escalates.
  std::uint32_t max_restarts = 10;
  std::chrono::milliseconds within{60000};
  /// Delay before the k-th restart in the window: min(backoff_initial * 2^(k-1), backoff_max).
  std::chrono::milliseconds backoff_initial{10};
  std::chrono::milliseconds backoff_max{2000};
  /// The decision table; default_decider when empty.
  std::function<supervisor_decision(const caf::error&)> decider{};
};

/// A supervisor's restart intensity and backoff: the restarts after failures within the last
/// `within`, and the delay before the next one.
class restart_window {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  explicit restart_window(const supervisor_config& config)
      : max_restarts_(config.max_restarts),
        within_(config.within),
        backoff_initial_(config.backoff_initial),
        backoff_max_(config.backoff_max) {}

  /// One more restart at `now`: the delay before it, min(backoff_initial * 2^(k-1), backoff_max)
  /// for the k-th in the window; empty when it would exceed the intensity (nothing recorded;
  /// `exceeded` says why).
  [[nodiscard]] std::optional<std::chrono::milliseconds> admit(time_point now);

  /// "restart intensity exceeded: N restarts within T ms".
  [[nodiscard]] std::string exceeded() const;

 private:
  std::uint32_t max_restarts_;
  std::chrono::milliseconds within_;
  std::chrono::milliseconds backoff_initial_;
  std::chrono::milliseconds backoff_max_;
  std::deque<time_point> times_;
};

}  // namespace uma
