#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include <uma/sys/detail/spin_wait.hpp>

namespace uma::detail {

/// A mutex for critical sections of tens of nanoseconds that many threads enter at once (the
/// block allocator's free lists). A waiter spins (bounded, yielding its core every 64 polls)
/// before it parks, because on the machines uma runs on a parked thread's wake-up costs up to
/// ~75 µs (docs/performance.md): with `std::mutex`, eight threads taking 64 KiB blocks spent a
/// median of 4.8-6.5 µs per allocate+release in futex sleeps against 0.25 µs with no parking
/// (H100 VM, uma_native_bench). Parking is Drepper's three-state mutex ("Futexes Are Tricky"):
/// 2 means locked with a possible sleeper, so an unlock that sees it wakes one.
class spin_mutex {
 public:
  /// How long a waiter spins before it parks: longer than any section guarded by it takes
  /// except a rare backend call (a close), shorter than a wake-up on a loaded VM.
  static constexpr std::chrono::microseconds spin_limit{20};

  void lock() noexcept {
    if (try_lock())
      return;
    if (spin_until([this] { return state_.load(std::memory_order_relaxed) == 0 && try_lock(); },
                   spin_limit))
      return;
    while (state_.exchange(2, std::memory_order_acquire) != 0)
      state_.wait(2, std::memory_order_relaxed);
  }
  [[nodiscard]] bool try_lock() noexcept {
    std::uint32_t free = 0;
    return state_.compare_exchange_strong(free, 1, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  /// Takes the lock before `deadline`, or returns false. Past the spin it polls, backing off
  /// up to 200 µs, instead of parking: a waiter with a deadline is never woken by an unlock.
  [[nodiscard]] bool try_lock_until(std::chrono::steady_clock::time_point deadline) noexcept {
    if (try_lock() || spin_until([this] { return try_lock(); }, spin_limit))
      return true;
    for (auto pause = std::chrono::microseconds(2); std::chrono::steady_clock::now() < deadline;
         pause = std::min(pause * 2, std::chrono::microseconds(200))) {
      std::this_thread::sleep_for(pause);
      if (try_lock())
        return true;
    }
    return false;
  }
  void unlock() noexcept {
    if (state_.exchange(0, std::memory_order_release) == 2)
      state_.notify_one();
  }

 private:
  std::atomic<std::uint32_t> state_{0};  // 0 free, 1 locked, 2 locked and maybe a sleeper
};

}  // namespace uma::detail
