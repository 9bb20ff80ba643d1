#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include <caf/message.hpp>

#include <uma/sys/detail/spin_wait.hpp>

namespace uma::detail {

/// Where one blocking call's reply lands (docs/design.md "Blocking callers"). The thread that
/// delivers the reply fills it; the caller spins on it for a bounded time (a parked thread costs
/// a futex wake-up, ~75 µs on a VM), then parks on a condition variable until the reply or its
/// deadline. Shared between the caller and the reply sink: a reply that comes after the caller
/// gave up lands in a slot nobody reads and is freed with it.
class reply_slot {
 public:
  /// How long a waiter spins before it parks: a few typical request round trips.
  static constexpr auto spin_limit = std::chrono::microseconds(50);

  /// Stores `reply` and wakes a parked waiter. Called at most once per slot (the sink takes the
  /// slot out of its table before filling it).
  void fill(caf::message reply) {
    reply_ = std::move(reply);
    if (state_.fetch_or(filled, std::memory_order_acq_rel) & parked) {
      std::lock_guard lock(mutex_);
      wake_.notify_all();
    }
  }

  /// Marks the slot as taken by the sink, whose `fill` follows at once (under the channel's
  /// table lock, so that a caller that finds its slot gone knows whether a fill is coming).
  void claim() noexcept { state_.fetch_or(claimed_bit, std::memory_order_relaxed); }
  /// True once claimed (the table's lock orders it for the caller that checks).
  [[nodiscard]] bool claimed() const noexcept {
    return (state_.load(std::memory_order_relaxed) & claimed_bit) != 0;
  }

  /// True once filled; then `reply()` may be read.
  [[nodiscard]] bool ready() const noexcept {
    return (state_.load(std::memory_order_acquire) & filled) != 0;
  }

  /// Waits until the slot is filled (true) or `deadline` passed (false): spins up to
  /// `spin_limit`, then parks.
  [[nodiscard]] bool wait_until(std::chrono::steady_clock::time_point deadline) {
    const auto left = deadline - std::chrono::steady_clock::now();
    return spin_until([this] { return ready(); },
                      std::min<std::chrono::nanoseconds>(left, spin_limit)) ||
           park_until(deadline);
  }

  /// The reply; only after `ready()` or a successful wait.
  [[nodiscard]] caf::message& reply() noexcept { return reply_; }

 private:
  static constexpr std::uint32_t filled = 1;
  static constexpr std::uint32_t parked = 2;
  static constexpr std::uint32_t claimed_bit = 4;

  bool park_until(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    if (state_.fetch_or(parked, std::memory_order_acq_rel) & filled)
      return true;
    return wake_.wait_until(lock, deadline, [this] { return ready(); });
  }

  std::atomic<std::uint32_t> state_{0};
  caf::message reply_;
  std::mutex mutex_;
  std::condition_variable wake_;
};

}  // namespace uma::detail
