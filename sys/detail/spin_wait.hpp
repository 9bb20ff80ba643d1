#pragma once

#include <chrono>
#include <thread>

namespace uma::detail {

/// Tells the CPU that this thread spins on a flag (x86 `pause`, Arm `yield`).
inline void cpu_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Spins until `ready()` holds (true) or `limit` passed (false): the bounded spin before a
/// thread parks (work_queue's lanes, reply_slot's callers). Every 64 polls it checks the clock
/// and yields the core: the thread it waits for may be runnable on this very core (the kernel
/// places a woken thread beside its waker), and two threads spinning on one core would each wait
/// out the other's whole spin.
template <class Ready>
[[nodiscard]] bool spin_until(Ready&& ready, std::chrono::nanoseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (unsigned i = 1; !ready(); ++i) {
    cpu_pause();
    if (i % 64 == 0) {
      if (std::chrono::steady_clock::now() >= end)
        return ready();
      std::this_thread::yield();
    }
  }
  return true;
}

}  // namespace uma::detail
