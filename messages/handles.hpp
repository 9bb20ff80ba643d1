#pragma once

// The names of uma's typed handles: each request signature, and the allocator's and the
// supervisor's interfaces as the typed actors a client holds. Naming a handle needs no message
// type's definition and no atom's value (messages/names.hpp declares them), not CAF's
// typed_actor (declared in <caf/fwd.hpp>) and no type id: a header that only passes handles on
// includes this one. Code that sends requests includes messages/interface.hpp, which defines
// the types and the roles' slices (and includes messages/atoms.hpp: the atoms' values).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>

#include <uma/messages/names.hpp>

namespace uma {

/// Each request signature of uma's typed interfaces, written once. The allocator, the
/// supervisor (which forwards every one of the allocator's), the gateway and the remote
/// interface are composed from these, so a signature changes in one place.
namespace sig {

/// -> a ref to a new region; out_of_memory, quota_exceeded, overflow, invalid_argument,
///    capture_in_progress
using allocate = caf::replies_to<allocate_atom, allocate_request>::with<byte_ref>;
/// -> what was prefetched; invalid_argument (lengths, locations, duplicates),
///    allocator_stopped (inert ref)
using prefetch = caf::replies_to<prefetch_atom, prefetch_request>::with<op_result>;
/// -> what was discarded; as prefetch, minus locations
using discard = caf::replies_to<discard_atom, discard_request>::with<op_result>;
/// -> what was discarded and prefetched; as prefetch
using discard_prefetch = caf::replies_to<discard_prefetch_atom, prefetch_request>::with<op_result>;
/// -> what was advised; invalid_argument (location not allowed for the advice), allocator_stopped
using advise = caf::replies_to<advise_atom, advise_request>::with<op_result>;
/// -> advice and last prefetch location of the ref's range
using attributes = caf::replies_to<attributes_atom, byte_ref>::with<range_attributes>;
/// -> the incarnation's counters
using stats = caf::replies_to<stats_atom>::with<allocator_stats>;
/// -> what kind of memory the address is
using memory_kind = caf::replies_to<memory_kind_atom, std::uintptr_t>::with<uma::memory_kind>;
/// -> whether `location` (a device, or host) can access the ref's memory
using can_access = caf::replies_to<can_access_atom, location, byte_ref>::with<bool>;
/// -> the outstanding-allocation report
using regions = caf::replies_to<regions_atom>::with<std::vector<region_info>>;
/// -> stats, once every backend call queued before it has run
using flush = caf::replies_to<flush_atom>::with<allocator_stats>;
/// -> bytes of the block allocator's idle slabs given back to the backend (once freed)
using trim = caf::replies_to<trim_atom>::with<std::uint64_t>;
/// (bytes) -> the quota in force; 0 only reads it, non-zero sets it. invalid_argument (and no
///    change) when the new quota is below the live bytes. Local and remote interfaces share it.
using quota = caf::replies_to<quota_atom, std::uint64_t>::with<std::uint64_t>;
/// -> the incarnation's block allocator (memory/block_allocator.hpp): small blocks on the
///    caller's thread, without a message per block
using blocks = caf::replies_to<blocks_atom>::with<block_allocator_ref>;
/// -> the incarnation's caller calls (messages/caller_calls.hpp): prefetch, advice, attributes
///    and stats on the caller's thread, without a message per call
using calls = caf::replies_to<calls_atom>::with<caller_calls_ref>;
/// -> regions (with policy, advice, last prefetch), stats and the event history;
///    allocator_stopped through a supervisor that stopped
using snapshot = caf::replies_to<snapshot_atom>::with<allocator_snapshot>;
/// -> the moves queued for an access plan; invalid_argument (refs, device, policy, mode: nothing
///    changes), quota_exceeded (the device's budget cannot hold the plan), allocator_stopped
using will_access = caf::replies_to<will_access_atom, access_plan_request>::with<residency_result>;
/// -> holds released (one per extent of pages); invalid_argument for pages no plan holds
///    (nothing changes)
using done_with = caf::replies_to<done_with_atom, std::vector<byte_ref>>::with<std::uint64_t>;
/// The same by address range; invalid_argument also for a range in no live region.
using done_with_ranges =
    caf::replies_to<done_ranges_atom, std::vector<address_range>>::with<std::uint64_t>;
/// -> the discards queued: the contents are not needed, nothing moves back; invalid_argument
///    for pages a plan holds or no plan named
using dead = caf::replies_to<dead_atom, std::vector<byte_ref>>::with<residency_result>;
/// The same by address range; invalid_argument also for a range in no live region.
using dead_ranges =
    caf::replies_to<dead_ranges_atom, std::vector<address_range>>::with<residency_result>;
/// (device, bytes) -> the device's budget in force; 0 only reads it. invalid_argument for a
///    device that does not exist or a budget above its memory. Through a supervisor it outlives
///    restarts.
using budget = caf::replies_to<budget_atom, int, std::uint64_t>::with<std::uint64_t>;
/// (tenant, device, bytes) -> the tenant's budget on the device now: `bytes`, 0 removing it
using tenant_budget =
    caf::replies_to<tenant_budget_atom, std::string, int, std::uint64_t>::with<std::uint64_t>;
/// -> each device's residency account and the ledger
using residency = caf::replies_to<residency_atom>::with<residency_report>;

}  // namespace sig

/// Who hears about a supervisor's restarts: `restarted_atom, restart_event` once per new
/// incarnation, and once when the supervisor stops (`restart_cause::stopped`).
using restart_observer_actor = caf::typed_actor<caf::reacts_to<restarted_atom, restart_event>>;

namespace sig {

/// -> restarts, generations, last exit reason
using supervision = caf::replies_to<supervision_atom>::with<supervision_stats>;
/// -> the generation that now serves, once the current incarnation has stopped (its post_stop
///    ran, its refs went inert) and a new one started; allocator_stopped once the supervisor
///    stopped for good
using restart = caf::replies_to<restart_atom>::with<std::uint64_t>;
/// (observer) -> the generation now serving; the observer hears of every later restart
using subscribe = caf::replies_to<subscribe_atom, restart_observer_actor>::with<std::uint64_t>;
/// (observer) -> whether it was subscribed; it hears nothing more
using unsubscribe = caf::replies_to<unsubscribe_atom, restart_observer_actor>::with<bool>;

}  // namespace sig

/// The allocator's whole interface: what clients may send and what each request replies. The
/// roles' slices (messages/interface.hpp) compose to exactly this type.
using managed_allocator_actor =
    caf::typed_actor<sig::allocate, sig::blocks, sig::calls,  // allocation
                     sig::prefetch, sig::discard, sig::discard_prefetch, sig::advise,
                     sig::will_access, sig::done_with, sig::done_with_ranges, sig::dead,
                     sig::dead_ranges,  // placement
                     sig::attributes, sig::stats, sig::memory_kind, sig::can_access, sig::regions,
                     sig::flush, sig::snapshot, sig::residency,                // inspection
                     sig::quota, sig::budget, sig::tenant_budget, sig::trim>;  // administration

/// The supervisor's interface: the allocator's, forwarded to the current incarnation, plus
/// supervision (counters, explicit restart, restart observers). Clients hold this (or its
/// managed_allocator_actor view) as the stable address of "the allocator".
using allocator_supervisor_actor =
    caf::typed_actor<sig::allocate, sig::blocks, sig::calls, sig::prefetch, sig::discard,
                     sig::discard_prefetch, sig::advise, sig::will_access, sig::done_with,
                     sig::done_with_ranges, sig::dead, sig::dead_ranges, sig::attributes,
                     sig::stats, sig::memory_kind, sig::can_access, sig::regions, sig::flush,
                     sig::snapshot, sig::residency, sig::quota, sig::budget, sig::tenant_budget,
                     sig::trim, sig::supervision, sig::restart, sig::subscribe, sig::unsubscribe>;

}  // namespace uma
