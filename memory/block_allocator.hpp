#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <uma/memory/labelled_block.hpp>
#include <uma/memory/managed_ref.hpp>
#include <uma/memory/memory_resource.hpp>

namespace uma {

class event_history;

namespace detail {
class slab;
struct block;
struct block_shard;
class block_labels;
class slab_registry;
}  // namespace detail

/// The block allocator's settings.
struct block_allocator_config {
  /// The largest request served (larger ones are regions of their own: the allocator's message
  /// path).
  std::size_t max_bytes = std::size_t{16} << 20;
  /// Bytes of a slab (at least one block): a miss carves this much into blocks of its class.
  std::size_t slab_bytes = std::size_t{4} << 20;
};

// slab_bytes below is deprecated: its uses warn, but not the copies, moves and default
// construction the compiler writes (those are located at this definition, GCC and Clang warn
// there otherwise), so that copying a snapshot stays quiet.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/// The block allocator's counters (a snapshot).
struct block_stats {
  std::uint64_t in_use_bytes = 0;     ///< bytes of the blocks out (size-class rounded)
  std::uint64_t requested_bytes = 0;  ///< bytes asked for, of the blocks out
  std::uint64_t free_bytes = 0;       ///< bytes of the blocks waiting for reuse
  std::uint64_t blocks_in_use = 0;
  std::uint64_t hits = 0;                 ///< allocations served from a free block
  std::uint64_t misses = 0;               ///< allocations that carved a new slab
  std::uint64_t cross_stream_reuses = 0;  ///< blocks reused on another stream after an event
  std::uint64_t events_recorded = 0;
  std::uint64_t slabs = 0;             ///< slabs held
  std::uint64_t slabs_held_bytes = 0;  ///< their bytes (the allocator counts them as live bytes)
  /// slabs_held_bytes under its name before issue 38, kept one release (every snapshot has the
  /// same value in both): `slab_bytes` is one slab's size (`resource_stack_config::slab_bytes`).
  [[deprecated("block_stats::slab_bytes is slabs_held_bytes")]] std::uint64_t slab_bytes = 0;
};
#pragma GCC diagnostic pop

/// What `release_raw` found.
enum class raw_release : std::uint8_t {
  ok,
  unknown_pointer,  ///< not the start of a raw block that is out
  size_mismatch,    ///< a non-zero size that is not what was allocated (nothing changed)
  device_mismatch,  ///< a device other than the one it was allocated for (nothing changed)
};

/// uma's one small-block allocator, in the shape of PyTorch's caching allocator: blocks of size
/// classes (1-4 pages, then four per doubling) carved from slabs, free lists per (device,
/// stream); a block freed on a stream is reused on that stream at once and on another only once
/// an event recorded after the free has completed. One per allocator incarnation, shared by
/// the facade, the C ABI and actor clients (`blocks_atom`); a hit takes no message.
///
/// Every byte stays the actor's: a slab is memory from the incarnation's resource stack (quota,
/// statistics, labels), taken on the caller's thread, and a region of the actor's table from
/// its next message on (report, residency, post_stop). Blocks are ordinary `ManagedRef`s
/// (sub-views, pins, every request; inert once the incarnation stops). A block whose advice the
/// actor changed comes back through the actor, which resets it first.
///
/// Thread-safety: every member may be called from any thread at once. The free lists are
/// sharded (memory/detail/block_shard.hpp): a hit takes its thread's shard's lock only; growth,
/// raw lookups and the slab list take the slab registry's (memory/detail/slab_registry.hpp)
/// first. No backend call under a lock but event queries.
class block_allocator : public std::enable_shared_from_this<block_allocator> {
 public:
  /// Slabs come from `stack` (the top of the incarnation's resource stack); `control` is the
  /// incarnation's. Throws `invalid_argument` for a config it cannot honour.
  block_allocator(std::shared_ptr<memory_resource> stack,
                  std::shared_ptr<detail::control_block> control, block_allocator_config config);
  block_allocator(const block_allocator&) = delete;
  block_allocator& operator=(const block_allocator&) = delete;
  ~block_allocator();

  /// True when requests of `bytes` are served here (1 to max_bytes).
  [[nodiscard]] bool serves(std::size_t bytes) const noexcept {
    return bytes != 0 && bytes <= config_.max_bytes;
  }
  /// A block of at least `bytes` for use on (`device`, `stream`). Throws `invalid_argument` for a
  /// size it does not serve, `allocator_stopped` once the incarnation stops, or what the stack
  /// throws for a new slab (`quota_exceeded`, `out_of_memory`, ...).
  [[nodiscard]] byte_ref allocate(std::size_t bytes, int device, stream_view stream) {
    return detail::adopt_ref(take_ref(bytes, device, stream), 0, bytes);
  }
  /// `count` elements of T in one block (alignment: a page). Throws `overflow` when
  /// count * sizeof(T) overflows, else as `allocate`.
  template <class T>
  [[nodiscard]] ManagedRef<T> allocate_n(std::size_t count, int device, stream_view stream) {
    return detail::adopt_ref<T>(take_ref(bytes_of(count, sizeof(T)), device, stream), 0, count);
  }
  /// `count` elements of T in one block, recorded under `label` for the allocator's report and
  /// snapshot until its last drop (a label is for the report: it costs no region and no
  /// message). Throws as `allocate_n`, or std::bad_alloc recording the label (nothing out).
  template <class T>
  [[nodiscard]] ManagedRef<T> allocate_labelled(std::size_t count, std::string label, int device,
                                                stream_view stream) {
    return detail::adopt_ref<T>(
        take_labelled(bytes_of(count, sizeof(T)), std::move(label), device, stream), 0, count);
  }
  /// A block as a raw pointer (the C ABI); it comes back through `release_raw`. Its slab stays
  /// pinned while raw blocks of it are out. Throws as `allocate`.
  [[nodiscard]] void* allocate_raw(std::size_t bytes, int device, stream_view stream);
  /// Takes back a raw block, last used on `stream`; checks `bytes` when non-zero.
  [[nodiscard]] raw_release release_raw(void* ptr, std::size_t bytes, int device,
                                        stream_view stream) noexcept;
  /// A ref to the raw block holding [ptr, ptr + bytes), or an empty ref when no raw block out
  /// holds the range.
  [[nodiscard]] byte_ref ref_of(const void* ptr, std::size_t bytes);
  /// Gives back (to the actor, which frees them) the slabs whose blocks are all free and
  /// finished on their streams (events checked, never waited for); returns their bytes.
  std::uint64_t trim();
  /// Before a stop: unpins the slabs with no raw block out, so that post_stop frees them and
  /// leaks (reports) only what callers may still use.
  void prepare_stop() noexcept;
  /// The counters.
  [[nodiscard]] block_stats stats() const;
  /// The labelled blocks out now, in no particular order.
  [[nodiscard]] std::vector<labelled_block> labelled_blocks() const;
  /// The labelled block out whose slot holds bytes [p, p + bytes) whole, if any.
  [[nodiscard]] std::optional<labelled_block> labelled_holding(const void* p,
                                                               std::size_t bytes) const;
  /// A labelled block's hand-out and return become allocate and release events of `history`
  /// (generation `generation`), as a labelled region's are. Before the allocator is shared.
  void record_labels_in(std::shared_ptr<event_history> history, std::uint64_t generation) noexcept;
  /// The largest request served (`block_allocator_config::max_bytes`).
  [[nodiscard]] std::size_t max_block_bytes() const noexcept { return config_.max_bytes; }
  [[deprecated("use max_block_bytes()")]] [[nodiscard]] std::size_t max_bytes() const noexcept {
    return config_.max_bytes;
  }

  // -- the actor's side -------------------------------------------------------------------------

  /// The start of post_stop: nothing is handed out or carved from now on. A growth either queued
  /// its slab for the actor before (`control_block::enqueue_slab`: post_stop takes it from the
  /// queue) or gives the memory back itself.
  void seal() noexcept;
  /// The end of the incarnation (post_stop, after it decided what to free and leak): every slab
  /// is let go (blocks out keep their host records until they come
  /// back), raw blocks out are given up (their memory was leaked with their pinned slab).
  void close() noexcept;

  // -- the blocks' side (memory/detail/slab.cpp) ------------------------------------------------

  /// A block came back (its last drop, a raw release, or the actor's advice reset).
  void put_back(detail::block& b) noexcept;

 private:
  /// A block's record with the caller's count taken.
  [[nodiscard]] detail::region* take_ref(std::size_t bytes, int device, stream_view stream);
  [[nodiscard]] std::uint32_t class_of(std::size_t bytes) const noexcept;
  /// `count` * `size`; throws `overflow` when that overflows.
  [[nodiscard]] static std::size_t bytes_of(std::size_t count, std::size_t size) {
    if (count > SIZE_MAX / size)
      raise(errc::overflow, "block_allocator: " + std::to_string(count) + " elements of " +
                                std::to_string(size) + " bytes overflow size_t");
    return count * size;
  }
  /// As `take_ref`, the block recorded under `label` (out of line: the unlabelled path stays
  /// as small as it was).
  [[nodiscard]] detail::region* take_labelled(std::size_t bytes, std::string label, int device,
                                              stream_view stream);
  /// The calling thread's shard.
  [[nodiscard]] detail::block_shard& own_shard() noexcept;
  [[nodiscard]] std::uint32_t index_of(const detail::block_shard& sh) const noexcept;
  [[nodiscard]] detail::block* take(std::size_t bytes, int device, void* stream, bool raw);
  /// A free block from a shard other than `own` (each locked in turn), handed out; or null.
  [[nodiscard]] detail::block* steal(const detail::block_shard& own, std::uint32_t cls,
                                     std::size_t bytes, int device, void* stream, bool raw);
  [[nodiscard]] detail::block* grow(detail::block_shard& own, std::uint32_t cls, std::size_t bytes,
                                    int device, void* stream, bool raw);
  /// Hands free block `b` out of shard `sh` (its lock held); it comes back to shard `home`.
  void hand_out(detail::block_shard& sh, detail::block& b, std::size_t bytes, int device,
                void* stream, bool raw, std::uint32_t home);
  /// What `push` did with a block that came back.
  enum class pushed : std::uint8_t { listed, slab_gone, slab_gone_last };
  /// Takes a block that was out off the counters and onto shard `sh`'s free list (its lock
  /// held); when its slab was let go, the block is not listed and the caller finishes it (and
  /// deletes the slab when it was the slab's last block out).
  pushed push(detail::block_shard& sh, detail::block& b) noexcept;

  std::shared_ptr<memory_resource> stack_;
  std::shared_ptr<detail::control_block> control_;
  const block_allocator_config config_;
  const std::size_t page_;
  const std::uint32_t classes_;
  std::mutex grow_mutex_;  // one slab carved at a time
  /// The slabs; its lock is taken before any shard's.
  const std::unique_ptr<detail::slab_registry> registry_;
  /// The free lists (`detail::block_shards` of them), held by pointer so that this header needs
  /// no shard's definition: a hit pays one load for it.
  const std::unique_ptr<detail::block_shard[]> shards_;
  const std::unique_ptr<detail::block_labels> labels_;  // its own lock; labelled blocks only
  /// Set under the registry's lock and every shard's (seal, close); read under either.
  std::atomic<bool> closed_{false};
};

/// The shared handle to an incarnation's block allocator (the `blocks_atom` reply).
using block_allocator_ref = std::shared_ptr<block_allocator>;

}  // namespace uma
