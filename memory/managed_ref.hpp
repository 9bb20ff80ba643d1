#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include <uma/memory/control_block.hpp>
#include <uma/sys/error.hpp>

namespace uma {

template <class T>
class Pin;
template <class T>
class ManagedRef;

namespace detail {
/// The allocator internals' access to a ref's region record (see `record_of`, `adopt_ref`).
struct ref_access;
}  // namespace detail

/// A shared handle to (part of) a managed-memory region that an allocator actor owns.
///
/// Copies share ownership through one atomic count (relaxed increment, acq_rel decrement, as
/// CCCL's `shared_resource`); not `std::shared_ptr`, because the last drop must not free: it
/// hands the region back to the actor, the only code that frees. When the allocator stops, every
/// copy goes inert: `valid()` turns false, `data()` returns null, `pin()` throws
/// `allocator_stopped`, and dropping it frees nothing.
///
/// Thread-safety: distinct copies may be used concurrently from any thread (like `shared_ptr`).
/// The memory itself is not synchronized: host access goes through `pin()`, device access must be
/// ordered by the caller's streams.
template <class T>
class ManagedRef {
  static_assert(std::is_trivially_copyable_v<T>, "ManagedRef<T> needs a trivially copyable T");

 public:
  using element_type = T;

  /// An empty ref: not valid, size 0.
  ManagedRef() noexcept = default;

  ManagedRef(const ManagedRef& other) noexcept
      : region_(other.region_), offset_(other.offset_), count_(other.count_) {
    if (region_)
      detail::add_ref(region_);
  }
  ManagedRef(ManagedRef&& other) noexcept
      : region_(std::exchange(other.region_, nullptr)),
        offset_(std::exchange(other.offset_, 0)),
        count_(std::exchange(other.count_, 0)) {}
  ManagedRef& operator=(ManagedRef other) noexcept {
    swap(other);
    return *this;
  }
  ~ManagedRef() { reset(); }

  void swap(ManagedRef& other) noexcept {
    std::swap(region_, other.region_);
    std::swap(offset_, other.offset_);
    std::swap(count_, other.count_);
  }

  /// Drops this handle's share (the region goes back to its actor when it was the last).
  void reset() noexcept {
    if (auto* r = std::exchange(region_, nullptr))
      detail::drop_ref(r);
    offset_ = count_ = 0;
  }

  /// True while the ref names a region and its allocator is alive.
  [[nodiscard]] bool valid() const noexcept { return region_ && region_->control->alive(); }
  [[nodiscard]] explicit operator bool() const noexcept { return valid(); }
  /// True when the ref names no region at all (default-constructed or moved from).
  [[nodiscard]] bool empty() const noexcept { return region_ == nullptr; }

  /// Number of elements.
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  /// Number of bytes (size() * sizeof(T)).
  [[nodiscard]] std::size_t bytes() const noexcept { return count_ * sizeof(T); }
  /// The region's id within its allocator (0 for an empty ref).
  [[nodiscard]] std::uint64_t id() const noexcept { return region_ ? region_->id : 0; }
  /// The allocator incarnation that owns the region (0 for an empty ref).
  [[nodiscard]] std::uint64_t generation() const noexcept {
    return region_ ? region_->control->generation() : 0;
  }
  /// What the owning allocator's post_stop did, once it has stopped (nullopt before, or for an
  /// empty ref).
  [[nodiscard]] std::optional<stop_report> stop_info() const {
    return region_ ? region_->control->report() : std::nullopt;
  }
  /// Byte offset of this view inside its region.
  [[nodiscard]] std::size_t byte_offset() const noexcept { return offset_; }

  /// The raw pointer while valid, else null. Unsynchronized: prefer `pin()` for host access.
  [[nodiscard]] T* data() const noexcept {
    return valid() ? reinterpret_cast<T*>(region_->data + offset_) : nullptr;
  }

  /// Pins the region for host access: it cannot be freed until the pin is released, even if
  /// the allocator stops meanwhile. Throws `error(allocator_stopped)` (inert ref) or
  /// `error(invalid_argument)` (empty ref).
  [[nodiscard]] Pin<T> pin() const;
  /// Like `pin()`, but nullopt instead of throwing.
  [[nodiscard]] std::optional<Pin<T>> try_pin() const noexcept;
  /// Keeps the region pinned until `stream` reaches this point (a host callback releases the
  /// pin), so kernels queued on `stream` keep it alive across a stop. Throws like `pin()`, or the
  /// backend's error if the callback cannot be queued.
  void pin_until(stream_view stream) const;

  /// A view of `count` elements from element `first`, sharing ownership. Throws
  /// `error(invalid_argument)` when the view does not fit.
  [[nodiscard]] ManagedRef subview(std::size_t first, std::size_t count) const {
    if (first > count_ || count > count_ - first)
      raise(errc::invalid_argument, "subview [" + std::to_string(first) + ", +" +
                                        std::to_string(count) + ") does not fit in " +
                                        std::to_string(count_) + " elements");
    return ManagedRef(region_, offset_ + first * sizeof(T), count, share_tag{});
  }

  /// The same bytes seen as elements of U, sharing ownership. Throws `error(invalid_argument)`
  /// when the byte size is not a multiple of sizeof(U) or the view is misaligned for U.
  template <class U>
  [[nodiscard]] ManagedRef<U> as() const {
    if (bytes() % sizeof(U) != 0 || (region_ && offset_ % alignof(U) != 0))
      raise(errc::invalid_argument, std::to_string(bytes()) + " bytes at offset " +
                                        std::to_string(offset_) + " cannot be viewed as " +
                                        std::to_string(bytes() / sizeof(U)) + " elements of " +
                                        std::to_string(sizeof(U)) + " bytes (alignment " +
                                        std::to_string(alignof(U)) + ")");
    return ManagedRef<U>(region_, offset_, bytes() / sizeof(U),
                         typename ManagedRef<U>::share_tag{});
  }

  /// The byte range this view covers (for the allocator and backends).
  [[nodiscard]] byte_range range() const noexcept {
    return region_ ? byte_range{region_->data + offset_, bytes()} : byte_range{};
  }
  friend bool operator==(const ManagedRef& a, const ManagedRef& b) noexcept {
    return a.region_ == b.region_ && a.offset_ == b.offset_ && a.count_ == b.count_;
  }

 private:
  template <class>
  friend class ManagedRef;
  // The region record is the allocator's business, not the ref holder's: reached only through
  // detail::record_of.
  friend struct detail::ref_access;
  struct share_tag {};
  struct adopt_tag {};

  ManagedRef(detail::region* r, std::size_t offset, std::size_t count, share_tag) noexcept
      : region_(r), offset_(offset), count_(count) {
    if (region_)
      detail::add_ref(region_);
  }
  ManagedRef(detail::region* r, std::size_t offset, std::size_t count, adopt_tag) noexcept
      : region_(r), offset_(offset), count_(count) {}

  detail::region* region_ = nullptr;
  std::size_t offset_ = 0;  // bytes
  std::size_t count_ = 0;   // elements
};

/// The untyped ref that messages carry; `as<T>()` gives a typed view.
using byte_ref = ManagedRef<std::byte>;

namespace detail {

struct ref_access {
  template <class T>
  [[nodiscard]] static region* record(const ManagedRef<T>& ref) noexcept {
    return ref.region_;
  }
  template <class T>
  [[nodiscard]] static ManagedRef<T> adopt(region* r, std::size_t offset,
                                           std::size_t count) noexcept {
    return ManagedRef<T>(r, offset, count, typename ManagedRef<T>::adopt_tag{});
  }
};

/// The region record behind `ref` (null for an empty ref). Allocator internals only: the
/// record's counts and flags are the lifetime protocol of docs/design.md.
template <class T>
[[nodiscard]] region* record_of(const ManagedRef<T>& ref) noexcept {
  return ref_access::record(ref);
}

/// A ref adopting one count of `r` that the caller already took (allocator internals).
template <class T = std::byte>
[[nodiscard]] ManagedRef<T> adopt_ref(region* r, std::size_t offset, std::size_t count) noexcept {
  return ref_access::adopt<T>(r, offset, count);
}

}  // namespace detail

}  // namespace uma

#include <uma/memory/pin.hpp>
