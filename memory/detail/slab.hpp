#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>

#include <uma/memory/detail/block_shard.hpp>
#include <uma/memory/memory_resource.hpp>
#include <uma/memory/pin.hpp>

namespace uma {

class block_allocator;

namespace detail {

class slab;

/// One block of a slab: the record its refs share, and where it was last used. `next`, the
/// stream fields and the flags belong to whoever holds the block: the block allocator (under the
/// lock of the shard listing it) while the block is free, the caller it was handed to while it
/// is out.
struct block {
  block(std::shared_ptr<control_block> control, std::uint64_t id, std::byte* data,
        std::size_t bytes, region* home, slab* parent)
      : rec(std::move(control), id, data, data, bytes, bytes, home, parent) {}

  region rec;
  block* next = nullptr;
  void* event = nullptr;        ///< made on first need; recorded on `stream` after a free
  bool event_recorded = false;  ///< `event` covers the block's last use on `stream`
  bool clean = true;            ///< never handed out: no stream has work on it
  bool stream_bound = false;    ///< no event could be made: reused on its own stream only
  bool labelled = false;        ///< handed out with a label (the allocator forgets it on return)
  /// Handed out as a pointer (`block_allocator::allocate_raw`); read by raw lookups under the
  /// allocator's slab lock while a shard's lock hands the block out.
  std::atomic<bool> raw{false};
  int device = 0;
  std::uint32_t shard = 0;    ///< the free-list shard it was handed out of, and goes back to
  void* stream = nullptr;     ///< the stream of its last use (allocation, then free)
  std::size_t requested = 0;  ///< bytes asked for while out
  std::atomic<bool> out{false};
};

/// One slab: a region of the allocator's table (memory from the resource stack, so quota, stats
/// and report count it) carved into equal blocks of one size class, each with a record of its
/// own. The host object lives until the block allocator let go of it and no block is out (both
/// counted under the allocator's lock); it keeps the allocator alive, so a block dropped late
/// still finds its way back.
class slab {
 public:
  /// Carves the region `home` (whose user count this slab takes over) into `count` blocks of
  /// `block_bytes` with ids [first_id, first_id + count).
  slab(std::shared_ptr<block_allocator> owner, region* home, std::uint64_t first_id,
       std::size_t block_bytes, std::uint32_t count, std::uint32_t size_class);
  slab(const slab&) = delete;
  slab& operator=(const slab&) = delete;

  [[nodiscard]] block& at(std::uint32_t i) noexcept { return blocks_[i]; }
  /// The block whose record is `r`.
  [[nodiscard]] block& of(const region* r) noexcept {
    return blocks_[static_cast<std::uint32_t>(r->id - first_id_)];
  }
  /// The block starting at `p`, or null.
  [[nodiscard]] block* block_at(const void* p) noexcept;
  /// The block holding [p, p + bytes), or null when the range is not inside one block.
  [[nodiscard]] block* block_holding(const void* p, std::size_t bytes) noexcept;
  [[nodiscard]] std::uint32_t count() const noexcept { return count_; }
  [[nodiscard]] std::size_t block_bytes() const noexcept { return block_bytes_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return block_bytes_ * count_; }
  [[nodiscard]] std::uintptr_t begin() const noexcept {
    return reinterpret_cast<std::uintptr_t>(home_->data);
  }
  [[nodiscard]] std::uint32_t size_class() const noexcept { return class_; }
  [[nodiscard]] region* home() const noexcept { return home_; }
  [[nodiscard]] block_allocator& owner() const noexcept { return *owner_; }
  /// The backend whose events order the blocks across streams.
  [[nodiscard]] backend& events() const noexcept { return home_->control->owning_backend(); }
  [[nodiscard]] bool alive() const noexcept { return home_->control->alive(); }

  /// Pins the slab while raw blocks are out, so post_stop leaks memory a caller may still use
  /// instead of freeing it. Throws `error(allocator_stopped)`.
  void pin_for_raw();
  /// Drops that pin.
  void unpin() noexcept { pin_.reset(); }
  /// Drops the slab's count of its region: the actor frees the memory (or post_stop did).
  ~slab();
  /// Carves a new slab of `count` blocks of `block_bytes` (class `size_class`) from `stack`
  /// (memory labelled "slab: N x S bytes", ids of `control`). Throws what the stack throws
  /// (quota_exceeded, out_of_memory, ...), holding nothing.
  [[nodiscard]] static slab* carve(std::shared_ptr<block_allocator> owner, memory_resource& stack,
                                   const std::shared_ptr<control_block>& control,
                                   std::size_t block_bytes, std::size_t count,
                                   std::uint32_t size_class);
  /// Undoes a slab the allocator could not take (its incarnation stopped meanwhile): the memory
  /// goes back to `stack` and the region record, which no table holds, is deleted.
  static void abandon(slab* s, memory_resource& stack) noexcept;

  /// Blocks out: the sum of one counter per shard of the allocator (a block counts in its
  /// home shard's), each on a cache line of its own, so threads handing out blocks of one slab
  /// do not all write one line. Exact under every shard's lock.
  [[nodiscard]] std::int64_t out() const noexcept {
    std::int64_t n = 0;
    for (const auto& c : out_by_shard_)
      n += c.n.load(std::memory_order_acquire);
    return n;
  }
  void count_out(std::uint32_t shard, int delta) noexcept {
    out_by_shard_[shard].n.fetch_add(delta, std::memory_order_acq_rel);
  }
  /// Once let go: the blocks still out, set with `let_go_done` (under every shard's lock); the
  /// block coming back last deletes the slab.
  std::atomic<std::int64_t> remaining{0};
  /// The allocator let go (set under every shard's lock; read under one).
  bool let_go_done = false;

 private:
  std::shared_ptr<block_allocator> owner_;
  region* home_;
  const std::uint64_t first_id_;
  const std::size_t block_bytes_;
  const std::uint32_t count_;
  const std::uint32_t class_;
  struct alignas(64) out_count {
    std::atomic<std::int32_t> n{0};
  };
  std::array<out_count, block_shards> out_by_shard_{};
  std::deque<block> blocks_;  // index = id - first_id; records never move
  std::optional<Pin<std::byte>> pin_;
};

/// Gives a block whose last ref was dropped (or whose advice the actor reset) back to its
/// allocator.
void return_block(region* r) noexcept;

}  // namespace detail
}  // namespace uma
