#pragma once

#include <cstdint>
#include <vector>

#include <caf/actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <uma/messages/atoms.hpp>
#include <uma/messages/interface.hpp>

namespace uma {

/// The remote-safe interface of a serving node (actors/remote_gateway.hpp), published over
/// CAF's middleman. Every argument and reply is plain data registered by `register_types`, so
/// it serializes: regions are named by `region_handle` (id + generation), never by pointer or
/// `ManagedRef`. See docs/distributed.md for what crosses the wire.
///
/// Memory allocated remotely is held by a *lease* of a session on the serving node. A session
/// is opened with the handle of an actor of the peer's process; the gateway monitors it, and
/// when it goes down (the peer process died, its connection dropped, or it closed the session)
/// every lease of the session is released. Requests about regions name the session; a region
/// must be leased by that session.
///
/// Errors are `caf::error`s of the `uma` category, as locally. Region lookups refuse an unknown
/// id with invalid_argument, and a stale generation (older than the allocator's current one, or
/// a region whose incarnation stopped) with allocator_stopped; both messages name the id and
/// the generations involved.
using remote_allocator_actor = caf::typed_actor<
    /// -> the new session's id; invalid_argument for an invalid actor handle
    caf::replies_to<open_session_atom, caf::actor>::with<std::uint64_t>,
    /// -> leases released; invalid_argument when the session is not open
    caf::replies_to<close_session_atom, std::uint64_t>::with<std::uint64_t>,
    /// (session, request) -> the new region, leased by the session; the local allocator's
    /// errors (quota_exceeded, invalid_argument, overflow, out_of_memory, ...)
    caf::replies_to<allocate_atom, std::uint64_t, remote_allocate_request>::with<region_handle>,
    /// (session, region) -> bytes of the region whose lease ended (its memory is freed unless
    /// someone on the serving node still holds a ref)
    caf::replies_to<release_atom, std::uint64_t, region_handle>::with<std::uint64_t>,
    /// (session, request) -> what was done
    caf::replies_to<prefetch_atom, std::uint64_t, remote_prefetch_request>::with<remote_op_result>,
    caf::replies_to<discard_atom, std::uint64_t, remote_discard_request>::with<remote_op_result>,
    caf::replies_to<advise_atom, std::uint64_t, remote_advise_request>::with<remote_op_result>,
    /// (session, region) -> advice and last prefetch location, as the serving node reads them
    caf::replies_to<attributes_atom, std::uint64_t, region_handle>::with<remote_attributes>,
    /// -> the allocator's, the supervisor's and the gateway's counters
    caf::replies_to<stats_atom>::with<remote_stats>,
    /// -> every region of the current allocator incarnation; attributes for leased ones
    caf::replies_to<regions_atom>::with<std::vector<remote_region_info>>,
    /// (bytes) -> the quota now in force: the allocator's own request (sig::quota), answered by
    /// the supervisor behind the gateway
    sig::quota,
    /// (session, region) -> never succeeds: not_supported, because managed memory cannot be
    /// exported over CUDA IPC. The reply type is what a cudaIpcMemHandle_t would have been.
    caf::replies_to<export_ipc_atom, std::uint64_t, region_handle>::with<std::vector<char>>>;

}  // namespace uma
