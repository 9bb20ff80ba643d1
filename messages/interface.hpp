#pragma once

// The allocator's typed interface by role, with every message type defined: what code that
// sends requests (or serves them) includes. The signatures and the whole handles are in
// messages/handles.hpp.

#include <type_traits>

#include <caf/typed_actor.hpp>

#include <uma/memory/allocation_handoff.hpp>
#include <uma/memory/allocator_snapshot.hpp>
#include <uma/memory/allocator_stats.hpp>
#include <uma/memory/block_allocator.hpp>
#include <uma/memory/managed_ref.hpp>
#include <uma/memory/region_info.hpp>
#include <uma/messages/atoms.hpp>
#include <uma/messages/caller_calls.hpp>
#include <uma/messages/handles.hpp>
#include <uma/messages/inspect.hpp>
#include <uma/messages/remote_types.hpp>
#include <uma/messages/requests.hpp>
#include <uma/messages/supervision_types.hpp>

namespace uma {

/// The allocator's interface, cut by role. Each slice is a typed actor of its own, so that code
/// that only allocates (or only inspects) can hold the narrower handle; `managed_allocator_actor`
/// composes them. Every request is validated whole before anything changes; a failure replies a
/// `caf::error` of the `uma` category (see messages/error_category.hpp). Messages the allocator
/// sends itself (release wake-ups, its lanes' completions) are not part of any slice: they live
/// in the allocator's private extension (actors/managed_allocator.cpp).

/// Allocation: regions, the block allocator for small blocks, and the calls a caller makes on
/// its own thread.
using allocation_actor = caf::typed_actor<sig::allocate, sig::blocks, sig::calls>;
/// Placement: where data lives and what it is worth (moves, advice, access plans).
using placement_actor = caf::typed_actor<sig::prefetch, sig::discard, sig::discard_prefetch,
                                         sig::advise, sig::will_access, sig::done_with,
                                         sig::done_with_ranges, sig::dead, sig::dead_ranges>;
/// Inspection: answers about memory and the allocator, changing nothing.
using inspection_actor =
    caf::typed_actor<sig::attributes, sig::stats, sig::memory_kind, sig::can_access, sig::regions,
                     sig::flush, sig::snapshot, sig::residency>;
/// Administration: limits and housekeeping (quota, budgets, trim).
using administration_actor =
    caf::typed_actor<sig::quota, sig::budget, sig::tenant_budget, sig::trim>;

/// The slices compose to the whole interface (messages/handles.hpp).
static_assert(std::is_same_v<allocation_actor::extend_with<placement_actor>::extend_with<
                                 inspection_actor>::extend_with<administration_actor>,
                             managed_allocator_actor>);

/// What a supervisor adds to the allocator's interface.
using supervision_actor =
    caf::typed_actor<sig::supervision, sig::restart, sig::subscribe, sig::unsubscribe>;

static_assert(std::is_same_v<managed_allocator_actor::extend_with<supervision_actor>,
                             allocator_supervisor_actor>);

}  // namespace uma
