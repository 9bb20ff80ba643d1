#pragma once

#include <caf/actor_system_config.hpp>

namespace uma {

/// Configures CAF's work-stealing scheduler for request/response traffic with the allocator
/// (docs/performance.md, "Tail latency under concurrency"): idle workers poll their moderate
/// phase without sleeping between attempts, so that the clients an allocator's replies made
/// ready on its worker are stolen within microseconds instead of after a 50 µs sleep, which a
/// VM stretches to hundreds (8 clients' p99 on the H100 VM: 0.6–0.9 ms with CAF's defaults,
/// 31–154 µs with this). The relaxed phase (a condition variable, 10 ms) is unchanged, so an
/// idle system still goes quiet. Call before `parse`: options given on the command line or in
/// caf-application.ini (`work-stealing.moderate-sleep-duration`) override it. uma's own
/// programs and the C ABI apply it.
void tune_scheduler(caf::actor_system_config& cfg);

}  // namespace uma
