#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/execution_unit.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/resumable.hpp>

namespace uma::detail {

/// An execution unit that runs, on the calling thread, the actors a send from that thread made
/// ready (docs/design.md "Blocking callers"). A message sent from outside a CAF worker makes an
/// idle actor ready through the scheduler's shared enqueue: a worker that may be asleep picks it
/// up (a futex wake-up, or the end of a 50 µs sleep). Sent through this unit instead, the actor
/// is resumed right here, as a worker would: CAF's rule that one thread runs an actor at a time
/// holds, because the send that made it ready hands the actor to the sender alone.
///
/// One unit per actor system, never destroyed: an actor keeps the unit of its last resume as its
/// context, and may send through it later from any thread (then the job goes to the scheduler).
class inline_unit final : public caf::execution_unit {
 public:
  /// How many messages one resume processes before the actor goes back to the scheduler.
  static constexpr std::size_t throughput = 32;
  /// How many actors one `send` resumes on the calling thread at most (the rest: scheduler).
  static constexpr std::size_t max_jobs = 8;

  /// The unit of `sys`.
  [[nodiscard]] static inline_unit& of(caf::actor_system& sys);

  /// Queues `job` for the thread sending through this unit, or hands it to the scheduler when
  /// the calling thread is not inside `send` (a late send from an actor's stale context).
  void exec_later(caf::resumable* job) override;

  /// Enqueues `element` at `dest` through this unit, then runs the actors that became ready,
  /// until `done()` holds or `jobs` ran; what is left goes to the scheduler.
  void send(const caf::strong_actor_ptr& dest, caf::mailbox_element_ptr element,
            const std::function<bool()>& done = {}, std::size_t jobs = max_jobs);

 private:
  explicit inline_unit(caf::actor_system& sys) : caf::execution_unit(&sys) {}
  void run(std::vector<caf::resumable*>& ready, const std::function<bool()>& done,
           std::size_t jobs);
};

/// Sends `content` to `dest` as an anonymous message through its system's inline unit: a lane's
/// `job_done` runs the idle allocator on the lane's thread rather than waking a worker. Up to
/// `max_jobs` actors run here: `dest`, then those its run made ready (a supervisor relaying the
/// reply, an actor client receiving it); the rest go to the scheduler. An actor client that
/// blocks in its handler therefore holds that lane meanwhile (docs/design.md "Blocking callers").
void send_inline(const caf::strong_actor_ptr& dest, caf::message content);

}  // namespace uma::detail
