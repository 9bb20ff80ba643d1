#pragma once

// Spill instead of out-of-memory under the global install (docs/frameworks.md "Spill instead of
// OOM"), with a limit that can move (docs/frameworks.md "Joining the node's arbiter"). Once a
// device has a limit (uma_torch_set_memory_fraction, or a grant of the node's arbiter), the
// blocks handed to PyTorch on it are kept in allocation order, each either placed on the device
// or spilled: placed on the host and mapped for the device (preferred location host, accessed by
// the device), which reads it over the link. A new block that would take the device-placed bytes
// past the limit is spilled instead of refused. A lowered limit spills the most recently
// allocated placed blocks (and prefetches them to the host, contents kept) until the placed bytes
// are within it; a raised one brings spilled blocks back, oldest first, while they fit. The hooks
// see allocations, not uses, so the newest blocks go first: the oldest are the weights, read by
// every step (docs/frameworks.md says what was measured). A block given back is forgotten, and
// the block allocator resets the advice of a block it takes back. Advice is page-granular: blocks
// sharing a page share its placement. Internal to libuma_c; not installed.
//
// Thread-safety: every function may be called from any thread. A device that never had a limit
// costs the hooks one relaxed load (no lock); from its first limit on, its blocks are tracked
// under the device's lock.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <uma/c/uma.h>

namespace uma::c {

class torch_spill {
 public:
  static constexpr int max_devices = 64;
  /// A limit that limits nothing (a fraction of 1, a device never limited).
  static constexpr std::uint64_t no_limit = std::numeric_limits<std::uint64_t>::max();

  /// The device's limit (no_limit: none).
  [[nodiscard]] std::uint64_t limit(int device) const noexcept;
  /// A block PyTorch just got from `a`: on a device with a limit it is tracked, and spilled
  /// when placing it would take the device-placed bytes past the limit. Returns whether it was
  /// spilled. A failure of the advice leaves it placed (it still works).
  bool place(uma_allocator* a, void* ptr, std::size_t size, int device) noexcept;
  /// A block PyTorch gives back (called before the allocator takes it back).
  void forget(int device, const void* ptr) noexcept;
  /// The device's limit becomes `limit` (no_limit: none) and its blocks follow at once: the most
  /// recently allocated placed blocks are spilled (and prefetched to the host, waited for) while
  /// the placed bytes are above it, then spilled blocks come back, oldest first, while they fit.
  /// The first limit of a device takes over the blocks PyTorch holds there (torch_ledger), in
  /// their allocation order. Returns the device-placed bytes afterwards.
  std::uint64_t shrink_to(uma_allocator* a, int device, std::uint64_t limit) noexcept;
  /// The bytes of the tracked blocks placed on the device (0 for a device never limited).
  [[nodiscard]] std::uint64_t placed_bytes(int device) const noexcept;
  /// The bytes spilled so far, every spill counted (the figure a spill run reports).
  [[nodiscard]] std::uint64_t spilled_bytes() const noexcept;

 private:
  struct block {
    std::uintptr_t address = 0;
    std::size_t size = 0;
  };
  /// One device's blocks; reached only through `lock` (its mutex held).
  struct blocks {
    std::uint64_t limit = no_limit;
    std::uint64_t next = 0;                                   // the allocation order's next key
    std::map<std::uint64_t, block> placed;                    // by allocation order
    std::map<std::uint64_t, block> spilled;                   // by allocation order
    std::unordered_map<std::uintptr_t, std::uint64_t> order;  // address -> its key
    std::uint64_t placed_bytes = 0;
  };
  struct device_state {
    std::atomic<bool> tracking{false};  // set once, under the mutex, never cleared
    std::atomic<std::uint64_t> limit{no_limit};
    std::atomic<std::uint64_t> placed_bytes{0};
    std::mutex mutex;
    blocks guarded;
  };
  /// Runs `f(blocks&)` with the device's lock held, then publishes its figures.
  template <class F>
  auto locked(device_state& d, F&& f);
  void take_over(blocks& b, int device) const;
  void insert(blocks& b, block blk, bool spilled) const;
  /// Spills the newest placed blocks down to the limit; returns how many moved.
  std::size_t spill_newest(uma_allocator* a, int device, blocks& b);
  /// Brings the oldest spilled blocks back while they fit under the limit.
  void bring_back_oldest(uma_allocator* a, int device, blocks& b);
  /// Moves `chosen` (spilled: to the host; else back to the device) and files each block under
  /// its new side; a block the allocator no longer holds is forgotten. Returns how many moved.
  std::size_t move(uma_allocator* a, int device, blocks& b,
                   const std::vector<std::pair<std::uint64_t, block>>& chosen, bool spill);

  std::array<device_state, max_devices> devices_{};
  std::atomic<std::uint64_t> spilled_bytes_{0};
};

[[nodiscard]] torch_spill& process_torch_spill() noexcept;

}  // namespace uma::c
