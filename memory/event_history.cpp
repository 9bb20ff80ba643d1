#include <uma/memory/event_history.hpp>

#include <uma/sys/detail/spin_mutex.hpp>

#include <algorithm>
#include <chrono>

namespace uma {
namespace {

/// The ring's lock, taken without parking where it can be: a record holds it for tens of
/// nanoseconds, threads handing out labelled blocks record at once, and a parked waiter costs
/// up to ~75 µs to wake on the machines uma runs on: it spins as long as a spin_mutex does.
std::unique_lock<std::mutex> take(std::mutex& m) {
  if (m.try_lock() ||
      detail::spin_until([&] { return m.try_lock(); }, detail::spin_mutex::spin_limit))
    return std::unique_lock(m, std::adopt_lock);
  return std::unique_lock(m);
}

}  // namespace

std::string_view to_string(event_kind k) noexcept {
  switch (k) {
    case event_kind::allocate:
      return "allocate";
    case event_kind::release:
      return "release";
    case event_kind::prefetch:
      return "prefetch";
    case event_kind::advise:
      return "advise";
    case event_kind::discard:
      return "discard";
    case event_kind::stop:
      return "stop";
    case event_kind::restart:
      return "restart";
  }
  return "unknown";
}

event_history::event_history(std::size_t capacity) : capacity_(capacity), ring_(capacity) {}

void event_history::record(event_kind kind, std::uint64_t generation, std::uint64_t region,
                           std::uint64_t bytes, std::string_view label, std::string_view detail) {
  if (capacity_ == 0)
    return;
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const auto lock = take(mutex_);
  auto& slot = ring_[next_];
  slot.time_ns = now;
  slot.kind = kind;
  slot.generation = generation;
  slot.region = region;
  slot.bytes = bytes;
  slot.label.assign(label);  // reuses the slot's buffer
  slot.detail.assign(detail);
  next_ = next_ + 1 == capacity_ ? 0 : next_ + 1;
  ++count_;
}

std::vector<allocator_event> event_history::events() const {
  const auto lock = take(mutex_);
  const auto held = static_cast<std::size_t>(std::min<std::uint64_t>(count_, capacity_));
  std::vector<allocator_event> out;
  out.reserve(held);
  const std::size_t first = held < capacity_ ? 0 : next_;
  for (std::size_t i = 0; i < held; ++i)
    out.push_back(ring_[(first + i) % capacity_]);
  return out;
}

std::uint64_t event_history::dropped() const {
  const auto lock = take(mutex_);
  return count_ > capacity_ ? count_ - capacity_ : 0;
}

}  // namespace uma
