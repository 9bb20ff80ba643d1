#pragma once

// The allocator actor's work in flight on its lanes (actors/managed_allocator.cpp): each job
// posted gets a ticket and a completion, which runs under the actor's guard when the lane's
// job_done for that ticket comes back; a stream-ordered job (prefetch, discard) goes to the lane
// of an unfinished job on the same stream, so that a stream gets its operations in request
// order; a barrier's completion runs once every lane has run what was queued before it. At stop
// the completions still waiting are answered by the stop sequence (pending()). No lock of
// its own: it is part of the incarnation's state, reachable only through its guard (the
// actor's resume holds it while completions run).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <utility>

#include <caf/error.hpp>
#include <caf/message.hpp>
#include <caf/send.hpp>

#include <uma/actors/detail/lane_job.hpp>
#include <uma/messages/atoms.hpp>
#include <uma/sys/backend.hpp>
#include <uma/sys/worker_lanes.hpp>

namespace uma::detail {

/// A completion: the lane's result (a message with the job's value), or its error.
using finish_fn = std::function<void(caf::message&, caf::error&)>;

/// Completions of off-loop work waiting for their lane job, by ticket.
using pending_jobs = std::unordered_map<std::uint64_t, finish_fn>;

class off_loop_jobs {
 public:
  /// `lanes` may be constructed after this (it is used only once a job is posted).
  off_loop_jobs(worker_lanes& lanes, std::shared_ptr<backend> b)
      : lanes_(lanes), backend_(std::move(b)) {}

  /// Runs `job` on `lane` (detail::lane_job: its reply, job_done, goes to `self`); `finish`
  /// runs under the actor's guard with its result (take). Throws, with nothing queued or
  /// recorded, when the job cannot be queued.
  template <class Handle, class Job>
  void post(const Handle& self, std::size_t lane, Job job, stream_view stream, completion when,
            finish_fn finish, bool stream_ordered) {
    const auto ticket = ++next_ticket_;
    if (stream_ordered) {
      lane = lanes_.begin_stream(lane, stream);
      finish = [lanes = &lanes_, stream, inner = std::move(finish)](caf::message& payload,
                                                                    caf::error& err) {
        lanes->finish_stream(stream);
        inner(payload, err);
      };
    }
    pending_.emplace(ticket, std::move(finish));
    try {
      lanes_.post(lane, lane_job(std::move(job), self, ticket, lane, backend_, stream, when));
    } catch (...) {
      // Nothing was queued (a lane's thread could not start, or host memory ran out).
      pending_.erase(ticket);
      if (stream_ordered)
        lanes_.finish_stream(stream);
      throw;
    }
  }

  /// `finish` runs under the actor's guard once every lane has run what was queued before.
  template <class Handle>
  void barrier(const Handle& self, finish_fn finish) {
    const auto ticket = ++next_ticket_;
    pending_.emplace(ticket, std::move(finish));
    lanes_.barrier([self, ticket] {
      caf::anon_send(self, job_done_atom_v, ticket, caf::message{}, caf::error{}, false);
    });
  }

  /// The completion of `ticket`, taken out; empty when there is none (answered at stop).
  [[nodiscard]] finish_fn take(std::uint64_t ticket) {
    auto it = pending_.find(ticket);
    if (it == pending_.end())
      return {};
    auto finish = std::move(it->second);
    pending_.erase(it);
    return finish;
  }

  /// The completions still waiting: the stop sequence answers them.
  [[nodiscard]] pending_jobs& pending() noexcept { return pending_; }

 private:
  worker_lanes& lanes_;
  std::shared_ptr<backend> backend_;
  std::uint64_t next_ticket_ = 0;
  pending_jobs pending_;
};

}  // namespace uma::detail
