#pragma once

// What PyTorch's memory_stats() would say of the allocations PyTorch made through uma's
// pluggable-allocator hooks (uma_torch_malloc/uma_torch_free: the global install): the same
// keys, counted the way PyTorch's caching allocator counts them where the meaning is the same
// (docs/frameworks.md "PyTorch's memory tools"). Internal to libuma_c; not installed.

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace uma::c {

/// One figure of PyTorch's Stat: current, peak since the last peak reset, and the totals
/// allocated and freed since the last accumulated reset.
struct torch_stat {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  std::int64_t allocated = 0;
  std::int64_t freed = 0;

  void add(std::int64_t amount) noexcept;
  void remove(std::int64_t amount) noexcept;
};

/// PyTorch's stat types: all, small_pool (blocks of 1 MiB or less), large_pool.
inline constexpr std::size_t torch_pools = 3;

/// The figures of one device.
struct torch_device_ledger {
  std::array<torch_stat, torch_pools> allocation, allocated_bytes, requested_bytes;
  torch_stat reserved_bytes;  // the allocator's held bytes, sampled (see sample_reserved)
  std::int64_t num_ooms = 0;
  std::int64_t num_device_alloc = 0, num_device_free = 0;  // the allocator's own allocations
};

/// The ledger of every device PyTorch allocated on. Thread-safe.
class torch_ledger {
 public:
  /// Most devices counted; an allocation on a device past it counts nowhere.
  static constexpr int max_devices = 64;

  /// PyTorch's rounding of a request (c10's CUDACachingAllocator round_size: 512-byte
  /// multiples, 512 at least) and its pool (small: 1 MiB or less after rounding).
  [[nodiscard]] static std::size_t rounded(std::size_t size) noexcept;
  [[nodiscard]] static bool small(std::size_t size) noexcept;

  /// What an allocation left on its device: its allocated bytes, and whether they reached a
  /// new peak (the caller samples the reserved bytes then).
  struct after_allocation {
    std::int64_t allocated = 0;
    bool new_peak = false;
  };
  /// A block handed to PyTorch (`stream`: the one it was allocated on) and its return.
  after_allocation allocated(int device, std::uintptr_t ptr, std::size_t size,
                             std::uintptr_t stream) noexcept;
  void freed(int device, std::uintptr_t ptr, std::size_t size) noexcept;
  void out_of_memory(int device) noexcept;
  /// The allocator's held bytes and its own allocation counts, read at this moment.
  void sample_reserved(int device, std::int64_t held, std::int64_t allocations,
                       std::int64_t releases) noexcept;

  void reset_peaks(int device) noexcept;
  void reset_accumulated(int device) noexcept;
  /// PyTorch's flat dict ("allocated_bytes.all.current": ...) as a JSON object.
  [[nodiscard]] std::string json(int device) const;
  /// The blocks PyTorch holds on `device`, by address: [{"address", "size", "stream"}].
  [[nodiscard]] std::string live_json(int device) const;
  /// The same blocks as (address, size) pairs, oldest allocation first (what the spill takes
  /// over when its first limit is set: c_torch_spill.hpp).
  [[nodiscard]] std::vector<std::pair<std::uintptr_t, std::size_t>> live_blocks(int device) const;

 private:
  [[nodiscard]] bool counted(int device) const noexcept;

  mutable std::mutex mutex_;
  std::array<torch_device_ledger, max_devices> devices_{};
  std::array<std::int64_t, max_devices> device_alloc_base_{}, device_free_base_{};
  struct live_block {
    int device;
    std::size_t size;
    std::uintptr_t stream;
    std::uint64_t order;  // allocation order (next_order_ when it was handed out)
  };
  std::uint64_t next_order_ = 0;
  std::map<std::uintptr_t, live_block> live_;
};

/// The process's ledger (the global install has one default allocator).
[[nodiscard]] torch_ledger& process_torch_ledger() noexcept;

}  // namespace uma::c
