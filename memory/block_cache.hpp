#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include <uma/memory/detail/lease_state.hpp>

namespace uma {

class block_cache;

namespace detail {
/// The allocator internals' way to hand out a lease (see `adopt_cache`).
struct cache_access;
}  // namespace detail

/// The client-side fast path: equal blocks leased from an allocator, handed out and taken back
/// on the caller's thread without a message (a few atomic operations each way).
///
/// The allocator still owns everything: a lease is one region of its table (live bytes, quota,
/// region report, freed by post_stop), carved into page-aligned, page-rounded blocks. A block is
/// an ordinary `ManagedRef`: sub-views, pins, pin_until and every request (prefetch, advise,
/// discard, attributes) work on it, and it goes inert when the allocator stops. Its last drop
/// returns it to the lease (or, if its advice was changed, to the allocator, which resets the
/// advice first). The lease's memory goes back to the allocator once every handle and every
/// block is gone.
///
/// Thread-safety: copies of a handle share one lease; `try_allocate` may be called from any
/// thread, blocks may be dropped anywhere (one cache per client thread avoids contention).
class block_cache {
 public:
  /// An empty cache: `try_allocate` throws `invalid_argument`.
  block_cache() noexcept = default;
  block_cache(const block_cache& other) noexcept : state_(other.state_) {
    if (state_)
      state_->retain();
  }
  block_cache(block_cache&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  block_cache& operator=(block_cache other) noexcept {
    std::swap(state_, other.state_);
    return *this;
  }
  ~block_cache() { reset(); }

  /// Lets go of this handle (the lease ends once no handle and no block is left).
  void reset() noexcept {
    if (auto* s = std::exchange(state_, nullptr))
      s->release();
  }

  /// A block holding `bytes` (1 ≤ bytes ≤ block_bytes()), or nullopt when every block is in use
  /// or the allocator has stopped (the lease is inert). Throws `error(invalid_argument)` for an
  /// empty cache, zero bytes or more than a block.
  [[nodiscard]] std::optional<byte_ref> try_allocate(std::size_t bytes);
  /// `count` elements of T in one block (alignment: a page), or nullopt as `try_allocate`.
  template <class T>
  [[nodiscard]] std::optional<ManagedRef<T>> try_allocate_n(std::size_t count) {
    if (count > SIZE_MAX / sizeof(T))
      raise(errc::overflow, "block_cache: " + std::to_string(count) + " elements of " +
                                std::to_string(sizeof(T)) + " bytes overflow size_t");
    auto ref = try_allocate(count * sizeof(T));
    if (!ref)
      return std::nullopt;
    return ref->template as<T>();
  }

  /// True while the cache names a lease and its allocator is alive.
  [[nodiscard]] bool valid() const noexcept { return state_ && state_->control().alive(); }
  [[nodiscard]] bool empty() const noexcept { return state_ == nullptr; }
  /// Bytes of each block (the requested size rounded up to a page).
  [[nodiscard]] std::size_t block_bytes() const noexcept {
    return state_ ? state_->block_bytes() : 0;
  }
  /// Blocks in the lease.
  [[nodiscard]] std::size_t capacity() const noexcept { return state_ ? state_->capacity() : 0; }
  /// Blocks not handed out right now (a snapshot).
  [[nodiscard]] std::size_t available() const noexcept { return state_ ? state_->available() : 0; }
  /// The id of the lease's backing region in its allocator's table (0 for an empty cache).
  [[nodiscard]] std::uint64_t lease_id() const noexcept {
    return state_ ? state_->backing().id() : 0;
  }
  /// The allocator incarnation that granted the lease (0 for an empty cache).
  [[nodiscard]] std::uint64_t generation() const noexcept {
    return state_ ? state_->backing().generation() : 0;
  }

  friend bool operator==(const block_cache& a, const block_cache& b) noexcept {
    return a.state_ == b.state_;
  }

 private:
  friend struct detail::cache_access;
  detail::lease_state* state_ = nullptr;
};

namespace detail {

struct cache_access {
  /// The lease behind a handle (null for an empty one): the caching layer carves it.
  [[nodiscard]] static lease_state* state(const block_cache& c) noexcept { return c.state_; }
  [[nodiscard]] static block_cache adopt(lease_state* s) noexcept {
    block_cache c;
    c.state_ = s;
    return c;
  }
};

/// A cache taking over a freshly made lease's first handle (allocator internals).
[[nodiscard]] inline block_cache adopt_cache(lease_state* s) noexcept {
  return cache_access::adopt(s);
}

}  // namespace detail

}  // namespace uma
