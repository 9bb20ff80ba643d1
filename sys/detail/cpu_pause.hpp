#pragma once

namespace uma::detail {

/// Tells the CPU that this thread spins on a flag (x86 `pause`, Arm `yield`): the bounded spins
/// before a thread parks (work_queue, reply_slot) cost the sibling hyperthread less.
inline void cpu_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace uma::detail
