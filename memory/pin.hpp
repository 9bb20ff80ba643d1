#pragma once

#include <cstddef>
#include <span>
#include <utility>

#include <uma/memory/managed_ref.hpp>

namespace uma {

/// RAII host access to a managed region: while a Pin lives the region is not freed, not even by
/// the allocator's post_stop (which waits for pins, bounded, and leaks what stays pinned rather
/// than free it under a reader). Move-only.
template <class T>
class Pin {
 public:
  Pin(Pin&& other) noexcept : ref_(std::move(other.ref_)) {}
  Pin& operator=(Pin&& other) noexcept {
    if (this != &other) {
      release();
      ref_ = std::move(other.ref_);
    }
    return *this;
  }
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;
  ~Pin() { release(); }

  /// The pinned elements.
  [[nodiscard]] std::span<T> span() const noexcept { return {data(), size()}; }
  [[nodiscard]] T* data() const noexcept {
    return ref_.empty() ? nullptr
                        : reinterpret_cast<T*>(detail::record_of(ref_)->data + ref_.byte_offset());
  }
  [[nodiscard]] std::size_t size() const noexcept { return ref_.size(); }
  [[nodiscard]] T* begin() const noexcept { return data(); }
  [[nodiscard]] T* end() const noexcept { return data() + size(); }
  [[nodiscard]] T& operator[](std::size_t i) const noexcept { return data()[i]; }
  /// The ref this pin holds.
  [[nodiscard]] const ManagedRef<T>& ref() const noexcept { return ref_; }

  /// Releases the pin early (the destructor then does nothing).
  void release() noexcept {
    if (ref_.empty())
      return;
    auto* r = detail::record_of(ref_);
    r->home->pins.fetch_sub(1, std::memory_order_seq_cst);
    auto control = r->control;  // the ref may be the last: keep the control block for the call
    ref_.reset();
    control->release_pin();
  }

 private:
  template <class>
  friend class ManagedRef;
  explicit Pin(ManagedRef<T> ref) noexcept : ref_(std::move(ref)) {}

  ManagedRef<T> ref_;
};

template <class T>
std::optional<Pin<T>> ManagedRef<T>::try_pin() const noexcept {
  if (!region_)
    return std::nullopt;
  // Region count first: a stopper that saw this pin's control-block count time out must still
  // see the region count when it decides what to free (all seq_cst, see control_block).
  // A leased block counts its pins on the lease's backing region (`home`), which post_stop sees.
  region_->home->pins.fetch_add(1, std::memory_order_seq_cst);
  if (!region_->control->try_acquire_pin()) {
    region_->home->pins.fetch_sub(1, std::memory_order_seq_cst);
    return std::nullopt;
  }
  return Pin<T>(*this);
}

template <class T>
Pin<T> ManagedRef<T>::pin() const {
  if (!region_)
    raise(errc::invalid_argument, "pin: the ref is empty");
  if (auto p = try_pin())
    return std::move(*p);
  raise(errc::allocator_stopped, "pin: region " + std::to_string(region_->id) + " of generation " +
                                     std::to_string(region_->control->generation()) +
                                     " is inert: its allocator has stopped");
}

namespace detail {
template <class T>
void release_stream_pin(void* pin) {
  delete static_cast<Pin<T>*>(pin);
}
}  // namespace detail

template <class T>
void ManagedRef<T>::pin_until(stream_view stream) const {
  auto* held = new Pin<T>(pin());
  try {
    auto& control = *region_->control;
    control.watched([&] {
      control.owning_backend().launch_host_func(stream, &detail::release_stream_pin<T>, held);
    });
  } catch (...) {
    delete held;
    throw;
  }
}

}  // namespace uma
