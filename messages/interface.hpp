#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <uma/messages/atoms.hpp>

namespace uma {

/// The allocator's typed interface: what clients may send and what each request replies.
/// Every request is validated whole before anything changes; a failure replies a `caf::error`
/// of the `uma` category (see messages/error_category.hpp).
using managed_allocator_actor = caf::typed_actor<
    /// -> a ref to a new region; out_of_memory, quota_exceeded, overflow, invalid_argument,
    ///    capture_in_progress
    caf::replies_to<allocate_atom, allocate_request>::with<byte_ref>,
    /// -> what was prefetched; invalid_argument (lengths, locations, duplicates),
    ///    allocator_stopped (inert ref)
    caf::replies_to<prefetch_atom, prefetch_request>::with<op_result>,
    caf::replies_to<discard_atom, discard_request>::with<op_result>,
    caf::replies_to<discard_prefetch_atom, prefetch_request>::with<op_result>,
    caf::replies_to<advise_atom, advise_request>::with<op_result>,
    /// -> advice and last prefetch location of the ref's range
    caf::replies_to<attributes_atom, byte_ref>::with<range_attributes>,
    caf::replies_to<stats_atom>::with<allocator_stats>,
    /// -> what kind of memory the address is
    caf::replies_to<memory_kind_atom, std::uintptr_t>::with<memory_kind>,
    /// -> whether `location` (a device, or host) can access the ref's memory
    caf::replies_to<can_access_atom, location, byte_ref>::with<bool>,
    /// -> the outstanding-allocation report
    caf::replies_to<regions_atom>::with<std::vector<region_info>>,
    /// -> stats, once every backend call queued before it has run
    caf::replies_to<flush_atom>::with<allocator_stats>,
    /// -> pool slabs given back to the backend (0 for the direct policy)
    caf::replies_to<trim_atom>::with<std::uint64_t>,
    /// (bytes) -> the quota in force; 0 only reads it, non-zero sets it. invalid_argument (and
    ///    no change) when the new quota is below the live bytes
    caf::replies_to<quota_atom, std::uint64_t>::with<std::uint64_t>,
    /// -> a client-side cache of `blocks` leased blocks (the fast path); invalid_argument,
    ///    overflow, quota_exceeded, out_of_memory
    caf::replies_to<lease_atom, lease_request>::with<block_cache>,
    /// the last drop of a live region's refs wakes the actor with this (no reply)
    caf::reacts_to<release_atom>>;

/// The supervisor's interface: the allocator's, forwarded to the current incarnation, plus the
/// supervision counters. Clients hold this (or its managed_allocator_actor view) as the stable
/// address of "the allocator".
using allocator_supervisor_actor = managed_allocator_actor::extend<
    /// -> restarts, generations, last exit reason
    caf::replies_to<supervision_atom>::with<supervision_stats>>;

}  // namespace uma
