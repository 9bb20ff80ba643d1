#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include <uma/memory/block_cache.hpp>
#include <uma/memory/pin.hpp>

namespace uma::detail {

class cache_core;
class cache_slab;

/// The caching layer's record of one leased block. `next`, `stream`, `event` and the flags
/// belong to whoever holds the block: the shard whose free list it is on (under that shard's
/// lock), or the thread it was handed to.
struct cache_block {
  region* rec = nullptr;
  cache_slab* slab = nullptr;
  cache_block* next = nullptr;
  void* event = nullptr;        ///< made on first need; recorded on `stream` after its free
  bool event_recorded = false;  ///< `event` covers the block's last use on `stream`
  bool clean = true;            ///< never handed out: no stream has work on it
  bool stream_bound = false;    ///< no event could be made: reused on its own stream only
  int device = 0;
  void* stream = nullptr;     ///< the stream of its last use (allocation, then free)
  std::size_t requested = 0;  ///< bytes asked for while handed out
  std::atomic<bool> out{false};
};

/// One lease of the caching layer: equal blocks of one size class, all taken from the lease
/// when it arrives. It is the lease's sink (the facade's blocks come back here on their last
/// drop) and lives until the lease state ends; it holds a count of the cache's core.
class cache_slab final : public block_sink {
 public:
  /// Takes every block of `lease` (raw mode: pins the lease, so post_stop never frees memory a
  /// caller may still use). Throws `error(allocator_stopped)` when the lease is inert.
  cache_slab(cache_core& core, block_cache lease, std::uint32_t size_class, bool raw);
  cache_slab(const cache_slab&) = delete;
  cache_slab& operator=(const cache_slab&) = delete;

  void returned(region* r) noexcept override;
  void lease_ended() noexcept override;

  [[nodiscard]] bool contains(std::uintptr_t a) const noexcept { return a - begin_ < bytes_; }
  /// The block starting at `p`, or null.
  [[nodiscard]] cache_block* block_at(const void* p) noexcept;
  /// The block holding [p, p + bytes), or null when the range is not inside one block.
  [[nodiscard]] cache_block* block_holding(const void* p, std::size_t bytes) noexcept;
  [[nodiscard]] cache_block& block(std::uint32_t i) noexcept { return blocks_[i]; }
  [[nodiscard]] std::uint32_t count() const noexcept { return count_; }
  [[nodiscard]] std::size_t block_bytes() const noexcept { return block_bytes_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] const std::byte* begin() const noexcept {
    return reinterpret_cast<const std::byte*>(begin_);
  }
  [[nodiscard]] std::uint32_t size_class() const noexcept { return class_; }
  /// The backend whose events order the blocks (the lease's allocator's).
  [[nodiscard]] backend& events() const noexcept { return *events_; }
  [[nodiscard]] bool alive() const noexcept { return control_->alive(); }
  [[nodiscard]] bool raw() const noexcept { return raw_; }
  [[nodiscard]] std::uint64_t generation() const noexcept { return control_->generation(); }
  /// Blocks handed out now (raw mode; a snapshot).
  [[nodiscard]] std::uint32_t out_count() const noexcept;
  /// Lets the lease go (its blocks keep it until they come back); drops the pin when
  /// `unpin`.
  void let_go(bool unpin) noexcept;
  /// Drops the pin only.
  void unpin() noexcept { pin_.reset(); }
  /// Trimmed while the cache goes on: when the lease ends the core keeps this (see
  /// cache_core::retire) instead of deleting it.
  void mark_retired() noexcept { retired_ = true; }

 private:
  friend class cache_core;  // deletes retired slabs (cache_core::retire)
  ~cache_slab() = default;

  cache_core& core_;
  block_cache lease_;
  std::optional<Pin<std::byte>> pin_;
  std::unique_ptr<cache_block[]> blocks_;
  const control_block* control_;
  backend* events_;
  std::uintptr_t begin_ = 0;
  std::size_t bytes_ = 0;
  std::size_t block_bytes_ = 0;
  std::uint32_t count_ = 0;
  std::uint32_t class_ = 0;
  bool raw_ = false;
  bool retired_ = false;
};

}  // namespace uma::detail
