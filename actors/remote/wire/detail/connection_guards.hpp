#pragma once

// What the frame guards of every connection of a wire server share (frame_guard.hpp): the
// bounds, the ledger of unfinished message bytes per identity, how many connections each bound
// closed (the server's counters, in `/metrics`), and the admission of new connections per
// identity: at most so many a second, and none for a while after one of the identity's went past
// a bound per second, so that connecting again is no way around one (each new connection would
// bring a fresh count of resets and pings, and costs gRPC a transport).

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <uma/actors/remote/wire/detail/frame_guard.hpp>
#include <uma/actors/remote/wire/detail/guarded_pipe.hpp>
#include <uma/actors/remote/wire/detail/unfinished_ledger.hpp>

namespace uma::detail {

/// How new connections of one identity are admitted.
struct admission_limits {
  std::uint32_t per_second = 20;            ///< new connections of one identity a second
  std::chrono::milliseconds penalty{1000};  ///< none after one went past a bound
};

class connection_guards {
 public:
  using clock_type = std::chrono::steady_clock;

  connection_guards(frame_limits limits, admission_limits admission)
      : limits_(limits), admission_(admission), ledger_(limits_) {}
  connection_guards(const connection_guards&) = delete;
  connection_guards& operator=(const connection_guards&) = delete;

  /// A guard for a new connection of `identity`.
  [[nodiscard]] std::unique_ptr<frame_guard> make(const std::string& identity) {
    return std::make_unique<frame_guard>(limits_, ledger_, identity);
  }
  /// Why a new connection of `identity` is refused now (empty when it is admitted, and then
  /// counted).
  [[nodiscard]] std::string admit(const std::string& identity, clock_type::time_point now) {
    std::lock_guard lock(mutex_);
    auto& a = admitted_[identity];
    if (now < a.penalty_until)
      return "one of its connections went past a bound less than " +
             std::to_string(admission_.penalty.count()) + " ms ago";
    if (now - a.second >= std::chrono::seconds(1)) {
      a.second = now;
      a.count = 0;
    }
    if (a.count >= admission_.per_second)
      return "it opened " + std::to_string(a.count) + " connections in the last second, the cap";
    ++a.count;
    if (admitted_.size() > 4096)  // forget the identities whose second and penalty are over
      std::erase_if(admitted_, [now](const auto& e) {
        return now - e.second.second >= std::chrono::seconds(1) && now >= e.second.penalty_until;
      });
    return {};
  }
  /// Counts a connection of `identity` closed because of `r` (not `none`) and logs it; when `r`
  /// is a bound per second, refuses the identity's new connections for the penalty's time (a
  /// new connection would start its counts again; the other bounds hold across connections or
  /// cost the peer its connection at its first bytes).
  void closed(guard_reason r, const std::string& identity,
              const std::function<void(const std::string&)>& log) {
    ++closed_[static_cast<std::size_t>(r)];
    if (per_second(r)) {
      std::lock_guard lock(mutex_);
      admitted_[identity].penalty_until = clock_type::now() + admission_.penalty;
    }
    if (log)
      log("closed a connection of " + identity + ": " + std::string(to_string(r)) +
          " past its bound (docs/distributed.md, \"Bounds\")");
  }
  /// Pumps `pipe`, a connection of `identity`: the flow `pump` says, a refusal of its guard
  /// counted and logged (`closed`) when it ended so. Both fronts pump through this one place.
  [[nodiscard]] guarded_pipe::flow pump(guarded_pipe& pipe, const std::string& identity,
                                        const std::function<void(const std::string&)>& log) {
    const auto flow = pipe.pump();
    if (flow == guarded_pipe::flow::ended && pipe.refused() != guard_reason::none)
      closed(pipe.refused(), identity, log);
    return flow;
  }
  /// Connections closed because of `r` since start.
  [[nodiscard]] std::uint64_t closed(guard_reason r) const noexcept {
    return closed_[static_cast<std::size_t>(r)].load();
  }
  [[nodiscard]] const unfinished_ledger& ledger() const noexcept { return ledger_; }

 private:
  [[nodiscard]] static bool per_second(guard_reason r) noexcept {
    return r == guard_reason::pings || r == guard_reason::settings || r == guard_reason::resets ||
           r == guard_reason::empty_frames;
  }
  struct admission {
    clock_type::time_point second{};  // the start of the second `count` counts
    std::uint32_t count = 0;
    clock_type::time_point penalty_until{};
  };
  const frame_limits limits_;
  const admission_limits admission_;
  unfinished_ledger ledger_;
  std::mutex mutex_;
  std::map<std::string, admission, std::less<>> admitted_;
  std::array<std::atomic<std::uint64_t>, guard_reason_count> closed_{};
};

}  // namespace uma::detail
