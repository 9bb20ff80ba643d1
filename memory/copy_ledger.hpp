#pragma once

// The copy engines' half of the migration ledger (docs/design.md "Tiers"): bytes uma copied
// between the memory it owns, by direction. Kept by an incarnation's control block, since copies
// run on their callers' threads (memory/copy.hpp); the allocator's stats read it.

#include <atomic>
#include <cstdint>

#include <uma/sys/memory_kind.hpp>

namespace uma {

/// Which way a copy went: from the host tier to device-side memory (device memory or managed
/// memory), back, or within one side.
enum class copy_direction : std::uint8_t { to_device, to_host, other };

/// The direction of a copy from memory of kind `from` to memory of kind `to`.
[[nodiscard]] constexpr copy_direction direction_of(memory_kind from, memory_kind to) noexcept {
  const bool from_host = from == memory_kind::pinned_host;
  const bool to_host = to == memory_kind::pinned_host;
  if (from_host == to_host)
    return copy_direction::other;
  return from_host ? copy_direction::to_device : copy_direction::to_host;
}

/// What the ledger has counted.
struct copy_counts {
  std::uint64_t to_device_bytes = 0;
  std::uint64_t to_host_bytes = 0;
  std::uint64_t other_bytes = 0;
  std::uint64_t copies = 0;
  friend bool operator==(const copy_counts&, const copy_counts&) = default;
};

/// Thread-safe counters (relaxed: they order nothing).
class copy_ledger {
 public:
  /// Counts one copy of `bytes` going `d`.
  void count(copy_direction d, std::uint64_t bytes) noexcept {
    (d == copy_direction::to_device ? to_device_
     : d == copy_direction::to_host ? to_host_
                                    : other_)
        .fetch_add(bytes, std::memory_order_relaxed);
    copies_.fetch_add(1, std::memory_order_relaxed);
  }
  [[nodiscard]] copy_counts counts() const noexcept {
    return {to_device_.load(std::memory_order_relaxed), to_host_.load(std::memory_order_relaxed),
            other_.load(std::memory_order_relaxed), copies_.load(std::memory_order_relaxed)};
  }

 private:
  std::atomic<std::uint64_t> to_device_{0}, to_host_{0}, other_{0}, copies_{0};
};

}  // namespace uma
