#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace uma {

/// What happened to the allocator (one entry of its event history).
enum class event_kind : std::uint8_t {
  allocate,  ///< a region was handed out
  release,   ///< a region's last ref dropped and it went back
  prefetch,  ///< a region was asked to move (detail: the destination)
  advise,    ///< advice was asked for a region (detail: advice and location)
  discard,   ///< a region's contents were asked to be discarded
  stop,      ///< an incarnation stopped (detail: what its post_stop did)
  restart,   ///< a new incarnation started (detail: the generations)
};

/// "allocate", "release", "prefetch", "advise", "discard", "stop", "restart".
[[nodiscard]] std::string_view to_string(event_kind k) noexcept;

/// One entry of the event history.
struct allocator_event {
  std::int64_t time_ns = 0;  ///< system clock, nanoseconds since the Unix epoch
  event_kind kind = event_kind::allocate;
  std::uint64_t generation = 0;
  std::uint64_t region = 0;  ///< 0 for stop and restart
  std::uint64_t bytes = 0;
  std::string label{};
  std::string detail{};
  friend bool operator==(const allocator_event&, const allocator_event&) = default;
};

/// A bounded ring of allocator events: past its capacity the oldest entry is overwritten (and
/// counted as dropped); capacity 0 records nothing and costs one branch per event. Shared by a
/// supervisor's incarnations (one ring across restarts) and written by every thread that hands
/// out a labelled block, so it has no lock of its own: an event takes the next number from one
/// atomic counter and fills its slot under that slot's lock, so threads recording at once meet
/// only on the counter (no allocation once the ring is full and labels fit their slots'
/// strings). Events of one thread are held in the order it recorded them.
class event_history {
 public:
  /// A ring of `capacity` events (0: off). Allocates the slots up front.
  explicit event_history(std::size_t capacity);
  event_history(const event_history&) = delete;
  event_history& operator=(const event_history&) = delete;
  ~event_history();

  /// False when the capacity is 0: callers skip building what they would record.
  [[nodiscard]] bool enabled() const noexcept { return capacity_ != 0; }
  /// Records one event, stamped now.
  void record(event_kind kind, std::uint64_t generation, std::uint64_t region, std::uint64_t bytes,
              std::string_view label = {}, std::string_view detail = {});
  /// The events held, oldest first (an event whose recording is still under way on another
  /// thread is not among them yet).
  [[nodiscard]] std::vector<allocator_event> events() const;
  /// Events overwritten since the start (the ring was full).
  [[nodiscard]] std::uint64_t dropped() const;
  /// The capacity given at construction.
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }

 private:
  /// One event, its number and the lock that guards them (memory/event_history.cpp).
  struct slot;

  const std::size_t capacity_;
  const std::unique_ptr<slot[]> ring_;  // event n in slot n % capacity
  // Numbers handed out: events recorded in all. On a cache line of its own: every record
  // takes one, and the members above are read by every record.
  alignas(64) std::atomic<std::uint64_t> count_{0};
};

}  // namespace uma
