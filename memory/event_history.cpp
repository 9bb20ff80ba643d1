#include <uma/memory/event_history.hpp>

#include <uma/sys/detail/spin_mutex.hpp>

#include <algorithm>
#include <chrono>

namespace uma {

/// A slot of its own cache lines: threads recording at once fill neighbouring slots.
namespace {
constexpr auto none = ~std::uint64_t{0};  // a slot's number while it holds no event
}  // namespace

struct alignas(64) event_history::slot {
  detail::spin_mutex mutex;     // held for the copy of one event, tens of nanoseconds
  std::uint64_t number = none;  // of the event held
  allocator_event event;
};

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

event_history::event_history(std::size_t capacity)
    : capacity_(capacity), ring_(capacity != 0 ? new slot[capacity] : nullptr) {}

event_history::~event_history() = default;

void event_history::record(event_kind kind, std::uint64_t generation, std::uint64_t region,
                           std::uint64_t bytes, std::string_view label, std::string_view detail) {
  if (capacity_ == 0)
    return;
  const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  // acq_rel: a reader that sees this number sees this thread's earlier events written.
  const auto number = count_.fetch_add(1, std::memory_order_acq_rel);
  auto& s = ring_[number % capacity_];
  std::lock_guard lock(s.mutex);
  if (s.number != none && s.number > number)
    return;  // the ring came round while this thread waited: a later event has the slot
  // The slot holds no event while it is written: a label that cannot be copied (bad_alloc)
  // leaves it empty, not an event of mixed fields.
  s.number = none;
  auto& e = s.event;
  e.time_ns = now;
  e.kind = kind;
  e.generation = generation;
  e.region = region;
  e.bytes = bytes;
  e.label.assign(label);  // reuses the slot's buffer
  e.detail.assign(detail);
  s.number = number;
}

std::vector<allocator_event> event_history::events() const {
  const auto count = count_.load(std::memory_order_acquire);
  const std::uint64_t first = count > capacity_ ? count - capacity_ : 0;
  std::vector<allocator_event> out;
  out.reserve(static_cast<std::size_t>(count - first));
  for (auto n = first; n < count; ++n) {
    auto& s = ring_[n % capacity_];
    std::lock_guard lock(s.mutex);
    if (s.number == n)  // else still being recorded, or already overwritten
      out.push_back(s.event);
  }
  return out;
}

std::uint64_t event_history::dropped() const {
  const auto count = count_.load(std::memory_order_acquire);
  return count > capacity_ ? count - capacity_ : 0;
}

}  // namespace uma
