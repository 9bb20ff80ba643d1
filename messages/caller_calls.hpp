#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include <uma/memory/allocator_stats.hpp>
#include <uma/memory/managed_ref.hpp>
#include <uma/messages/requests.hpp>

namespace uma {

/// Requests an allocator incarnation serves on the caller's own thread, without a message
/// (docs/design.md "Calls on the caller's thread"): the caller takes the incarnation's core lock
/// (the lock the actor holds while it runs), does the part that reads or changes the actor's
/// state there (checks, history, bookkeeping, counters) and makes the backend call itself with
/// no lock held, as a lane would. The answers are those of the same request sent as a message
/// (`sig::prefetch`, `sig::advise`, `sig::attributes`, `sig::stats`), errors included.
///
/// Releases queued by last drops are drained first, as the actor drains them before each
/// request. A call that the actor's order does not allow here answers nullopt, changing nothing,
/// and the caller sends the request instead: while a job on the same stream is unfinished on a
/// lane (prefetch), a block or a tier (allocate), or advice that reaches the
/// runtime. Every call waits at most
/// until `deadline` for the lock (then `timeout`, as a message's reply
/// would) and throws `allocator_stopped` once the incarnation has stopped. Safe from any thread.
class caller_calls {
 public:
  using deadline = std::chrono::steady_clock::time_point;

  virtual ~caller_calls() = default;

  /// A region (a request the block allocator does not serve): checked and registered under the
  /// lock, its memory taken from the incarnation's resource stack with no lock held. A request
  /// the quota or the backend refuses is tried once more as the actor tries it (idle slabs given
  /// back, then behind the frees on their way), the caller waiting for it. Declines a block (the
  /// `pool` policy) and a tier's memory.
  [[nodiscard]] virtual std::optional<byte_ref> allocate(const allocate_request& r,
                                                         deadline until) = 0;
  /// A prefetch (after discarding the contents when `discard_first`).
  [[nodiscard]] virtual std::optional<op_result> prefetch(const prefetch_request& r,
                                                          bool discard_first, deadline until) = 0;
  /// Advice the allocator knows to change nothing (no backend call). Advice that reaches the
  /// runtime declines: the actor's general lane applies advice in the order it records it.
  [[nodiscard]] virtual std::optional<op_result> advise(const advise_request& r,
                                                        deadline until) = 0;
  /// The advice and last prefetch location of `ref`'s range.
  [[nodiscard]] virtual range_attributes attributes(const byte_ref& ref, deadline until) = 0;
  /// The counters.
  [[nodiscard]] virtual std::optional<allocator_stats> stats(deadline until) = 0;
  /// True once the incarnation has stopped: every call throws `allocator_stopped` (its
  /// successor, if any, has calls of its own).
  [[nodiscard]] virtual bool ended() const noexcept = 0;
};

/// The shared handle to an incarnation's caller calls (the `calls_atom` reply).
using caller_calls_ref = std::shared_ptr<caller_calls>;

}  // namespace uma
