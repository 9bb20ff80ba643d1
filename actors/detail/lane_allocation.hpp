#pragma once

// An allocation the allocator could not serve on its own thread (actors/managed_allocator.cpp):
// the quota or the backend refused it, perhaps for memory that is still on its way back (a
// region's last drop frees it with cudaFree on the general lane, and the quota counts it until
// then). It is taken once more by one job on the general lane, behind the frees queued before
// it: here is that job, and the ref its result makes back on the actor's thread.

#include <utility>

#include <caf/message.hpp>

#include <uma/actors/detail/allocation_core.hpp>
#include <uma/actors/detail/off_loop_jobs.hpp>
#include <uma/memory/allocation_handoff.hpp>
#include <uma/sys/error.hpp>

namespace uma::detail {

/// Whether a refusal is tried once more behind the frees on their way: the quota's, or the
/// backend's out of memory (either may be memory still on its way back), never a fatal error.
/// The one rule of the actor's thread, the caller calls and the facade's block path.
[[nodiscard]] bool retried_on_lane(const error& e) noexcept;
/// The same by code, for a failure already known not to be fatal.
[[nodiscard]] bool retried_on_lane(errc code) noexcept;

/// The one more try of a region's memory (a lane job): the memory as an allocation_handoff, so
/// that a result nobody takes (the caller gave up, the stop came) gives it back.
[[nodiscard]] inline allocation_handoff region_retry(const std::shared_ptr<memory_resource>& stack,
                                                     const allocation_request& req) {
  return allocation_handoff(stack, stack->allocate(req));
}

/// Queues on the general lane of `jobs` the job that takes `req`: a block of the core's block
/// allocator, or a region's memory from its stack; `reply` gets the job's result (see
/// lane_allocation_ref). Throws, with nothing queued, when the job cannot be queued.
template <class Handle>
void post_lane_allocation(off_loop_jobs& jobs, const Handle& self, allocation_core& core,
                          allocation_request req, stream_view stream, finish_fn reply) {
  if (core.as_block(req))
    jobs.post(
        self, worker_lanes::general,
        [blocks = core.blocks(), req = std::move(req), stream] {
          return allocation_core::take_block(*blocks, req, stream);
        },
        {}, completion::enqueued, std::move(reply), false);
  else
    jobs.post(
        self, worker_lanes::general,
        [stack = core.resources(), req = std::move(req)] { return region_retry(stack, req); }, {},
        completion::enqueued, std::move(reply), false);
}

struct incarnation_state;

/// The ref a lane job's result makes, under the incarnation's guard: a block's ref as the job
/// took it, or the region's memory adopted (incarnation_state::adopt). Throws backend_error for
/// a result that holds neither.
[[nodiscard]] byte_ref lane_allocation_ref(incarnation_state& s, caf::message& payload,
                                           attach_flag attach);

}  // namespace uma::detail
