#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include <uma/memory/managed_ref.hpp>

#include <uma/memory/block_cache.hpp>

namespace uma {

namespace detail {
class cache_core;
}

/// How the caching layer hands blocks out: as `ManagedRef`s (the client facade: a block comes
/// back on its last drop) or as raw pointers (the C ABI: a block comes back through
/// `release_raw`, and its lease stays pinned while the cache holds it).
enum class cache_mode : std::uint8_t { refs, raw };

/// The caching layer's settings.
struct stream_cache_config {
  cache_mode mode = cache_mode::refs;
  /// The largest request served (larger ones take the allocator's message path).
  std::size_t max_bytes = std::size_t{1} << 30;
  /// Bytes leased at once for a size class (at least one block; at least 2 MiB).
  std::size_t slab_bytes = std::size_t{4} << 20;
  /// The backend's page: requests are rounded up to it, then to a size class.
  std::size_t page = 4096;
  /// Label of the leases in the allocator's region report.
  std::string label = "cache";
};

/// The caching layer's counters (summed over its shards; a snapshot).
struct stream_cache_stats {
  std::uint64_t in_use_bytes = 0;     ///< bytes of the blocks handed out (size-class rounded)
  std::uint64_t requested_bytes = 0;  ///< bytes asked for, of the blocks handed out
  std::uint64_t free_bytes = 0;       ///< bytes of the blocks waiting for reuse
  std::uint64_t blocks_in_use = 0;
  std::uint64_t hits = 0;                 ///< allocations served without the allocator
  std::uint64_t misses = 0;               ///< allocations that needed a new lease (a message)
  std::uint64_t cross_stream_reuses = 0;  ///< blocks reused on another stream after an event
  std::uint64_t events_recorded = 0;
  std::uint64_t leases = 0;        ///< leases held (live generation)
  std::uint64_t leased_bytes = 0;  ///< their bytes (the allocator counts them as live bytes)
};

/// What `release_raw` found.
enum class raw_release : std::uint8_t {
  ok,
  unknown_pointer,  ///< not the start of a block this cache handed out and did not take back
  size_mismatch,    ///< a non-zero size that is not what was allocated (nothing changed)
  device_mismatch,  ///< a device other than the one it was allocated for (nothing changed)
};

/// Where the cache's memory comes from: a block lease of `blocks` blocks of `block_bytes` from
/// the allocator (one message, on a miss). Throws `uma::error` (quota_exceeded,
/// allocator_stopped, ...), which the allocation passes on.
using lease_source =
    std::function<block_cache(std::size_t block_bytes, std::size_t blocks, std::string label)>;

/// The stream-aware caching layer on the caller's thread (PyTorch caching allocator /
/// `cudaFreeAsync` semantics) over block leases of an allocator: size-binned free lists per
/// (device, stream) in per-thread shards; a block freed on a stream is reused on that stream at
/// once, and on another only once an event recorded on the stream after the free has completed.
/// Every block lies in a lease, an ordinary region of the allocator (live bytes, quota, region
/// report, post_stop); blocks of a stopped generation are never handed out again.
///
/// Thread-safety: every member but the destructor may be called from any thread at once. No
/// lock is shared by all threads on the hot path: a thread works in its own shard (threads are
/// spread over 16 shards) and looks into the others only when its own is empty.
class stream_cache {
 public:
  stream_cache(lease_source source, stream_cache_config config);
  stream_cache(const stream_cache&) = delete;
  stream_cache& operator=(const stream_cache&) = delete;
  /// Gives every cached block back (raw mode: what is still handed out too — call after the
  /// allocator stopped, see `prepare_stop`).
  ~stream_cache();

  /// True when requests of `bytes` are served here (1 to max_bytes).
  [[nodiscard]] bool serves(std::size_t bytes) const noexcept;
  /// A block of at least `bytes` for use on (`device`, `stream`), as a ref (refs mode). Throws
  /// `invalid_argument` for a size it does not serve, or what the lease source throws.
  [[nodiscard]] byte_ref allocate(std::size_t bytes, int device, stream_view stream);
  /// `count` elements of T in one block for (`device`, `stream`) (refs mode; alignment: a page).
  /// Throws `overflow` when count * sizeof(T) overflows, else as `allocate`.
  template <class T>
  [[nodiscard]] ManagedRef<T> allocate_n(std::size_t count, int device, stream_view stream) {
    if (count > SIZE_MAX / sizeof(T))
      raise(errc::overflow, "stream_cache: " + std::to_string(count) + " elements of " +
                                std::to_string(sizeof(T)) + " bytes overflow size_t");
    return detail::adopt_ref<T>(take_ref(count * sizeof(T), device, stream), 0, count);
  }
  /// The same as a raw pointer (raw mode).
  [[nodiscard]] void* allocate_raw(std::size_t bytes, int device, stream_view stream);
  /// Takes back a block from allocate_raw, last used on `stream`; checks `bytes` when non-zero.
  /// A block the allocator advised leaves the cache instead: the allocator resets its advice
  /// and it goes back to its lease (the cache holds one block fewer from then on).
  [[nodiscard]] raw_release release_raw(void* ptr, std::size_t bytes, int device,
                                        stream_view stream) noexcept;
  /// A ref to the raw block holding [ptr, ptr + bytes) (for prefetch, advice, discard), or an
  /// empty ref when no handed-out block holds the range.
  [[nodiscard]] byte_ref ref_of(const void* ptr, std::size_t bytes) const noexcept;
  /// Raw mode, before the allocator is stopped: unpins the leases with no block handed out, so
  /// that post_stop frees them and leaks (reports) only what callers may still use.
  void prepare_stop() noexcept;
  /// Gives back (to the allocator) every lease whose blocks are all free and finished on their
  /// streams (events checked, never waited for); returns their bytes. Blocks handed out keep
  /// their leases. The allocator's own trim then returns free pool slabs to the backend.
  std::uint64_t trim();
  /// The counters.
  [[nodiscard]] stream_cache_stats stats() const;
  /// The largest request served.
  [[nodiscard]] std::size_t max_bytes() const noexcept;

 private:
  /// A block's record with one user count taken (refs mode).
  [[nodiscard]] detail::region* take_ref(std::size_t bytes, int device, stream_view stream);

  detail::cache_core* core_;
};

}  // namespace uma
