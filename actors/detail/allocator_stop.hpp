#pragma once

#include <cstdint>
#include <memory>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/detail/allocation_core.hpp>
#include <uma/actors/detail/off_loop_jobs.hpp>
#include <uma/actors/detail/residency_core.hpp>
#include <uma/memory/control_block.hpp>
#include <uma/sys/worker_lanes.hpp>

namespace uma::detail {

/// What an allocator incarnation's stop sequence works on.
struct stop_parts {
  const allocator_config& config;
  control_block& control;
  worker_lanes& lanes;
  uma::backend& runtime;  ///< the backend
  allocation_core& core;
  residency_core& residency;
  pending_jobs& pending;
};

/// The stop sequence (docs/design.md "Lifetime model") once the refs went inert and the caller
/// calls ended (incarnation::stop): pins drain (bounded by the config's drain timeout),
/// queued lane work runs out, the device synchronizes, the regions
/// are freed, the residency account goes back to zero, every pending request is answered
/// `allocator_stopped`, the config's on_stop callback gets the counters, and the control block
/// publishes the stop report. Never throws.
void stop_allocator(const stop_parts& parts) noexcept;

}  // namespace uma::detail
