#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include <uma/memory/managed_ref.hpp>

namespace uma::detail {

/// Who takes a leased block back instead of the lease's own free list: the caching layer
/// (memory/stream_cache.hpp), which keeps blocks per stream. Set once, before any block of the
/// lease is handed out; the lease tells it when it ends.
class block_sink {
 public:
  /// A block's last drop (or the allocator's advice reset) gives it back; the block still holds
  /// its holder count of the lease.
  virtual void returned(region* r) noexcept = 0;
  /// The lease state is being deleted (no handle and no block is left).
  virtual void lease_ended() noexcept = 0;

 protected:
  ~block_sink() = default;
};

/// The shared state of one block lease: `blocks` equal blocks carved from one backing region
/// that the allocator owns (an ordinary entry of its table), each with a reusable region record,
/// and a lock-free free list of the blocks not handed out.
///
/// Lifetime: `holders` counts the block_cache handles plus the blocks handed out; the last one
/// deletes the state, which drops the lease's ref to the backing region (the allocator frees it
/// then, or already did at post_stop). A block record is never deleted while a ref to it lives.
class lease_state {
 public:
  static constexpr std::uint32_t none = 0xffffffffu;

  /// Carves `backing` (at least `blocks * block_bytes` bytes) into blocks with ids
  /// [first_id, first_id + blocks). The caller holds the first handle.
  lease_state(byte_ref backing, std::uint64_t first_id, std::size_t block_bytes,
              std::uint32_t blocks);
  lease_state(const lease_state&) = delete;
  lease_state& operator=(const lease_state&) = delete;

  /// A free block with its first user count taken and a holder counted, or null when every
  /// block is handed out.
  [[nodiscard]] region* take() noexcept;
  /// Returns a block whose last ref was dropped (or whose advice the allocator reset) to the
  /// sink when there is one, else to the free list (letting go of its holder count; may delete
  /// the state).
  void give_back(region* r) noexcept;
  /// Returns a block to the free list whatever the sink, and lets go of its holder count; may
  /// delete the state.
  void return_block(region* r) noexcept;
  /// Routes the blocks' returns to `sink` (before any block is handed out).
  void set_sink(block_sink* sink) noexcept { sink_ = sink; }
  /// The index of block `r` in the lease, 0 to capacity() - 1.
  [[nodiscard]] std::uint32_t index_of(const region* r) const noexcept {
    return static_cast<std::uint32_t>(r->id - first_id_);
  }

  void retain() noexcept { holders_.fetch_add(1, std::memory_order_relaxed); }
  /// Drops a holder count; the last one deletes the state.
  void release() noexcept;

  /// Lease states alive in the process (tests check that every lease ends).
  [[nodiscard]] static std::int64_t live_count() noexcept {
    return live_.load(std::memory_order_acquire);
  }

  [[nodiscard]] const control_block& control() const noexcept {
    return *detail::record_of(backing_)->control;
  }
  [[nodiscard]] const byte_ref& backing() const noexcept { return backing_; }
  [[nodiscard]] std::size_t block_bytes() const noexcept { return block_bytes_; }
  [[nodiscard]] std::uint32_t capacity() const noexcept { return capacity_; }
  /// Blocks not handed out (a snapshot).
  [[nodiscard]] std::uint32_t available() const noexcept {
    return available_.load(std::memory_order_relaxed);
  }

 private:
  ~lease_state() {
    if (sink_ != nullptr)
      sink_->lease_ended();
    live_.fetch_sub(1, std::memory_order_acq_rel);
  }

  void push(std::uint32_t index) noexcept;

  const byte_ref backing_;
  const std::uint64_t first_id_;
  const std::size_t block_bytes_;
  const std::uint32_t capacity_;
  std::deque<region> blocks_;                     // index = id - first_id; records never move
  std::vector<std::atomic<std::uint32_t>> next_;  // free-list links
  std::atomic<std::uint64_t> head_;               // (tag << 32) | index; the tag defeats ABA
  std::atomic<std::uint32_t> available_;
  std::atomic<std::int64_t> holders_{1};
  block_sink* sink_ = nullptr;
  static inline std::atomic<std::int64_t> live_{0};
};

}  // namespace uma::detail
