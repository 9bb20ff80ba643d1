#pragma once

// Spill instead of out-of-memory under the global install (docs/frameworks.md "Spill instead of
// OOM"): once PyTorch set a memory fraction (uma_torch_set_memory_fraction), a block handed to
// PyTorch while the bytes it holds on the device are above that limit is placed on the host and
// mapped for the device (preferred location host, accessed by the device): the device reads it
// over the link instead of holding it, so what PyTorch holds on the device stays near the limit
// and nothing is refused. A block handed out once PyTorch is back under the limit stays on
// the device. A block given back is reset by the block allocator (it resets the advice of a
// block it takes back) and is placed anew when handed out again. Advice is page-granular: blocks
// sharing a page share its placement. Internal to libuma_c; not installed.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include <uma/c/uma.h>

namespace uma::c {

class torch_spill {
 public:
  static constexpr int max_devices = 64;

  /// The device's limit in bytes (0: none, nothing spills).
  void set_limit(int device, std::uint64_t bytes) noexcept;
  [[nodiscard]] std::uint64_t limit(int device) const noexcept;
  /// Places the block PyTorch just got on the host, mapped, when `held` (PyTorch's bytes on
  /// the device, this block included) is above the limit. Returns whether it did. A failure of
  /// the advice leaves the block where the driver puts it (it still works).
  bool place(uma_allocator* a, void* ptr, std::size_t size, int device, std::int64_t held) noexcept;
  /// The bytes handed out spilled so far (the figure a spill run reports).
  [[nodiscard]] std::uint64_t spilled_bytes() const noexcept;

 private:
  std::array<std::atomic<std::uint64_t>, max_devices> limits_{};
  std::atomic<std::uint64_t> spilled_bytes_{0};
};

[[nodiscard]] torch_spill& process_torch_spill() noexcept;

}  // namespace uma::c
