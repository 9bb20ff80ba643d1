#include <uma/actors/detail/core_lock.hpp>

#include <algorithm>

#include <uma/sys/detail/spin_wait.hpp>

namespace uma::detail {

bool core_lock::try_lock_until(std::chrono::steady_clock::time_point deadline) noexcept {
  if (mutex_.try_lock() ||
      spin_until([this] { return mutex_.try_lock(); }, spin_mutex::spin_limit)) {
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    return true;
  }
  // The actor runs something long (a backend call on its thread, the stop): poll, backing off.
  auto pause = std::chrono::microseconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(pause);
    if (mutex_.try_lock()) {
      owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
      return true;
    }
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
  return false;
}

}  // namespace uma::detail
