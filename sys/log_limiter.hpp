#pragma once

// Log lines at most `per_second` a second: lines a peer's requests cause (a connection refused or
// closed, a session opened or ended) would otherwise let a flood write one each (issue 35
// measured the log growing 7.8 MB in 20 s). The lines left out are counted in the next line
// written. `uma serve` puts one before its wire's and its gateway's log.

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>

namespace uma {

/// Passes lines on to a sink at most `per_second` a second (thread-safe).
class log_limiter {
 public:
  using sink = std::function<void(const std::string&)>;

  /// Writes to `log` (which may be empty: then nothing is written).
  explicit log_limiter(sink log, std::uint32_t per_second = 10)
      : log_(std::move(log)), per_second_(per_second) {}

  /// Writes `line` unless `per_second` lines were written in the current second (thread-safe).
  void operator()(const std::string& line) { write(line, std::chrono::steady_clock::now()); }

  /// `operator()` at the time `now` (steady_clock; never earlier than a previous call's).
  void write(const std::string& line, std::chrono::steady_clock::time_point now) {
    if (!log_)
      return;
    std::unique_lock lock(mutex_);
    if (now - second_ >= std::chrono::seconds(1)) {
      second_ = now;
      written_ = 0;
    }
    if (written_ >= per_second_) {
      ++left_out_;
      return;
    }
    ++written_;
    const auto left_out = std::exchange(left_out_, 0);
    lock.unlock();
    log_(left_out == 0 ? line
                       : line + " (and " + std::to_string(left_out) +
                             " more such lines left out of the log)");
  }

  /// This limiter as a sink (the limiter must outlive every copy).
  [[nodiscard]] sink as_sink() {
    return [this](const std::string& line) { (*this)(line); };
  }

 private:
  sink log_;
  std::uint32_t per_second_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point second_{};
  std::uint32_t written_ = 0;
  std::uint64_t left_out_ = 0;
};

}  // namespace uma
