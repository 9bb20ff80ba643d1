#pragma once

#include <atomic>
#include <chrono>
#include <thread>

#include <uma/sys/detail/spin_mutex.hpp>

namespace uma::detail {

/// The lock of an incarnation's state (actors/detail/incarnation.hpp): it spins before it parks
/// (a caller's part under it takes a microsecond or two), knows which thread holds it (the stop
/// runs inside a resume or, from the actor's destruction, outside one), and a caller waits for
/// it only until a deadline. Taken only through incarnation::guard.
class core_lock {
 public:
  void lock() noexcept {
    mutex_.lock();
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  /// Takes the lock before `deadline`, or returns false.
  [[nodiscard]] bool try_lock_until(std::chrono::steady_clock::time_point deadline) noexcept;
  void unlock() noexcept {
    owner_.store(std::thread::id{}, std::memory_order_relaxed);
    mutex_.unlock();
  }
  /// True on the thread that holds it.
  [[nodiscard]] bool held_here() const noexcept {
    return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }

 private:
  spin_mutex mutex_;
  std::atomic<std::thread::id> owner_{};
};

}  // namespace uma::detail
