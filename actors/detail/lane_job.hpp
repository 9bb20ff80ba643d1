#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include <caf/message.hpp>
#include <caf/send.hpp>

#include <uma/actors/detail/error_reply.hpp>
#include <uma/actors/detail/inline_unit.hpp>
#include <uma/messages/atoms.hpp>
#include <uma/messages/error_category.hpp>
#include <uma/messages/memory_requests.hpp>
#include <uma/sys/backend.hpp>
#include <uma/sys/worker_lanes.hpp>

namespace uma::detail {

/// A completion waiting for its stream: what the host callback sends back to the allocator.
template <class Handle>
struct stream_done {
  Handle actor;
  std::uint64_t ticket;
  caf::message payload;
};

template <class Handle>
void on_stream_done(void* arg) {
  // Runs on a CUDA runtime thread: sends a message, calls no CUDA API.
  std::unique_ptr<stream_done<Handle>> done(static_cast<stream_done<Handle>*>(arg));
  caf::anon_send(done->actor, job_done_atom_v, done->ticket, std::move(done->payload), caf::error{},
                 false);
}

/// Destroys what `job` captured (the refs it keeps alive while its backend call runs), in place.
/// Not by moving the job out: a capture declared const (`[ref]` of a `const byte_ref&`
/// parameter is a `const byte_ref` member) is copied by a move, and the lane's copy of the job
/// would keep its ref until the job's end, after the reply. Never throws: captures are refs,
/// vectors and shared pointers.
template <class Job>
void drop_captures(std::optional<Job>& job) noexcept {
  job.reset();
}

/// The lane side of one of the allocator's off-loop jobs: runs `job`, waits for `stream` when
/// the reply must wait for completion (on a prefetch's own lane; elsewhere a host callback
/// sends the reply), and sends `job_done` with the result or the error to `hdl`, through the
/// inline unit: an idle allocator handles it on this thread (docs/design.md "Blocking callers").
/// The job's captures are destroyed before the reply is sent: a caller that drops its ref after
/// the reply then makes the last drop, queued before anything it asks next (a flush, stats),
/// instead of racing the lane's own drop (which could land after the caller's flush had drained).
template <class Handle, class Job>
void run_lane_job(std::optional<Job>& job, const Handle& hdl, std::uint64_t ticket,
                  std::size_t lane, backend& b, stream_view stream, completion when) {
  caf::message payload;
  caf::error err;
  bool fatal = false;
  try {
    payload = caf::make_message((*job)());
    if (when == completion::complete && lane != worker_lanes::general) {
      // A prefetch's own lane waits for the stream (its host call already blocked for most of
      // the transfer); a host callback costs a few percent of bandwidth (performance.md).
      b.wait_stream(stream);
    } else if (when == completion::complete) {
      // The refs go now: the callback may send the reply at once (the host backend's streams
      // are synchronous), and a CUDA stream's queued work needs none (cudaFree waits for it).
      drop_captures(job);
      auto done = std::make_unique<stream_done<Handle>>(stream_done<Handle>{hdl, ticket, payload});
      b.launch_host_func(stream, &on_stream_done<Handle>, done.get());
      done.release();  // owned by the callback now
      return;
    }
  } catch (...) {
    const auto failed = failure_of(std::current_exception());  // the one mapping
    err = failed.reply();
    fatal = failed.fatal;
  }
  drop_captures(job);
  send_inline(
      caf::actor_cast<caf::strong_actor_ptr>(hdl),
      caf::make_message(job_done_atom_v, ticket, std::move(payload), std::move(err), fatal));
}

/// What a lane runs for `job`: run_lane_job on a job held in an optional, so that its captures
/// can be destroyed in place before the reply (see drop_captures).
template <class Handle, class Job>
[[nodiscard]] std::function<void()> lane_job(Job job, Handle hdl, std::uint64_t ticket,
                                             std::size_t lane, std::shared_ptr<backend> b,
                                             stream_view stream, completion when) {
  return [job = std::optional<Job>(std::move(job)), hdl = std::move(hdl), ticket, lane,
          b = std::move(b), stream,
          when]() mutable { run_lane_job(job, hdl, ticket, lane, *b, stream, when); };
}

}  // namespace uma::detail
