#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/message.hpp>

#include <uma/actors/detail/reply_slot.hpp>
#include <uma/actors/reply_value.hpp>
#include <uma/messages/error_category.hpp>
#include <uma/sys/detail/spin_mutex.hpp>

namespace uma::detail {

class inline_unit;

/// The blocking facades' way to an actor (docs/design.md "Blocking callers"): a request is sent
/// from the calling thread through its inline execution unit (the actor it makes ready runs
/// right there, not after a worker's wake-up), and the reply goes to a sink whose enqueue fills
/// the request's reply slot on the replying thread (no mailbox, no wake-up when the caller spins).
/// Safe from many threads at once; one channel per facade object, shared with its pending plans.
class request_channel {
 public:
  /// One request in flight: its id in the sink's table and its slot.
  struct ticket {
    std::uint64_t id = 0;
    std::shared_ptr<reply_slot> slot;
  };

  /// Spawns the reply sink (hidden: it does not keep the actor system waiting).
  explicit request_channel(caf::actor_system& sys);
  request_channel(const request_channel&) = delete;
  request_channel& operator=(const request_channel&) = delete;
  /// Detaches the sink from the table; replies still on the way are dropped.
  ~request_channel();

  /// Sends `content` to `dest` as a request. A dead `dest` bounces the request: the slot gets
  /// `sec::request_receiver_down`. A request sent `ahead` (a plan the caller collects later)
  /// counts in `ahead()` until its reply has come, whether or not anybody still waits for it.
  [[nodiscard]] ticket send(const caf::strong_actor_ptr& dest, caf::message content,
                            bool ahead = false);
  /// Waits at most until `deadline` for the reply: the value or a `caf::error`
  /// (`sec::request_timeout` past the deadline; the ticket is forgotten and a late reply
  /// dropped).
  [[nodiscard]] caf::message await(const ticket& t, std::chrono::steady_clock::time_point deadline);
  /// Forgets a ticket whose reply nobody will read (a dropped pending plan).
  void forget(const ticket& t);
  /// send, then await at most `timeout`.
  [[nodiscard]] caf::message request(const caf::strong_actor_ptr& dest, caf::message content,
                                     std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    return await(send(dest, std::move(content)), deadline);
  }
  /// Requests waiting for their reply (0 once every request returned or timed out).
  [[nodiscard]] std::size_t in_flight() const;
  /// Requests sent ahead whose reply has not come yet (dropped and timed-out ones included):
  /// while there is one, what the caller asks next must reach the actor behind it.
  [[nodiscard]] std::size_t ahead() const noexcept {
    return table_->ahead.load(std::memory_order_acquire);
  }

 private:
  /// Shared with the sink's handler, which may run after the channel is gone. Its lock spins
  /// before it parks: every request of every thread sharing the facade takes it twice (a slot in,
  /// a slot out, each tens of nanoseconds), and a parked caller costs up to ~75 µs to wake.
  struct table {
    struct entry {
      std::shared_ptr<reply_slot> slot;
      bool ahead = false;
    };
    mutable spin_mutex mutex;
    std::unordered_map<std::uint64_t, entry> slots;
    std::atomic<std::size_t> ahead{0};  ///< entries sent ahead
    /// Removes `id`'s slot and returns it (null when gone). `by_sink`: the reply came; the slot
    /// is marked as the sink's to fill, so that a caller whose deadline passed meanwhile waits
    /// for that fill. A caller giving up leaves a slot sent ahead to the sink, which counts it
    /// answered when its reply comes.
    [[nodiscard]] std::shared_ptr<reply_slot> take(std::uint64_t id, bool by_sink);
  };

  /// The system's inline unit, looked up once (inline_unit::of takes a process-wide lock).
  inline_unit& unit_;
  std::shared_ptr<table> table_ = std::make_shared<table>();
  caf::strong_actor_ptr sink_;
  std::atomic<std::uint64_t> next_id_{0};
};

}  // namespace uma::detail
