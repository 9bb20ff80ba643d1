#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <uma/messages/atoms.hpp>
#include <uma/messages/interface.hpp>

namespace uma {

/// The interface of a serving node's gateway (actors/remote/remote_gateway.hpp), inside the node:
/// the gRPC wire server (actors/remote/wire/) turns each call from another process into one of
/// these requests. Every argument and reply is plain data: regions are named by `region_handle` (id
/// + generation), never by pointer or `ManagedRef`. See docs/distributed.md for the wire.
///
/// Memory allocated remotely is held by a *lease* of a session on the serving node. A session
/// is opened with the handle of an actor of the peer's own node (a remote peer may not name the
/// gateway, a local actor or another node's actor); the gateway monitors it, and when it goes
/// down (the peer process died, its connection dropped, or it closed the session) every lease of
/// the session is released.
///
/// Authority: the reply to `open_session` is a `session_key` (id + 128-bit secret). Requests
/// about a session carry the key and must come from the node that opened it; a wrong key, or a
/// request from another node, is refused with invalid_argument and changes nothing. Tenants act
/// on their own leases and read their own region rows and the global counters; the operator
/// (holding the serving node's `operator_key`) sets the quota (never above the ceiling the node
/// was started with), reads every region, takes snapshots and restarts the allocator.
///
/// Errors are `caf::error`s of the `uma` category, as locally. Region lookups refuse an unknown
/// id with invalid_argument, and a stale generation (older than the allocator's current one, or
/// a region whose incarnation stopped) with allocator_stopped; both messages name the id and
/// the generations involved.
using remote_allocator_actor = caf::typed_actor<
    /// -> the new session's key; invalid_argument for no actor, an actor that is not of the
    /// requesting peer's node, the gateway itself, or a tenant over its session cap
    caf::replies_to<open_session_atom, caf::actor>::with<session_key>,
    /// (peer, tenant) -> the same for a tenant the serving node's own wire server identified
    /// from the connection (a Unix socket's peer uid, a client certificate); local senders only
    caf::replies_to<open_tenant_session_atom, caf::actor, std::string>::with<session_key>,
    /// -> leases released; invalid_argument when the session is not open or the key is wrong
    caf::replies_to<close_session_atom, session_key>::with<std::uint64_t>,
    /// (session, request) -> the new region, leased by the session; invalid_argument for a label
    /// over the cap or with control characters, an out-of-range attach flag; quota_exceeded
    /// over the tenant quota; the local allocator's errors
    caf::replies_to<allocate_atom, session_key, remote_allocate_request>::with<region_handle>,
    /// (session, region) -> bytes of the region whose lease ended (its memory is freed unless
    /// someone on the serving node still holds a ref)
    caf::replies_to<release_atom, session_key, region_handle>::with<std::uint64_t>,
    /// (session, request) -> what was done; out-of-range enums are refused before anything runs
    caf::replies_to<prefetch_atom, session_key, remote_prefetch_request>::with<remote_op_result>,
    caf::replies_to<discard_atom, session_key, remote_discard_request>::with<remote_op_result>,
    caf::replies_to<advise_atom, session_key, remote_advise_request>::with<remote_op_result>,
    /// (session, plan) -> the moves queued (docs/residency.md "Tenants"): the session's leased
    /// regions placed on the plan's device and held until done_with; they count for the
    /// session's tenant (its node), under the tenant's device budget where the node has one.
    /// The allocator's errors (invalid_argument, quota_exceeded) cross unchanged
    caf::replies_to<will_access_atom, session_key, remote_access_plan>::with<residency_result>,
    /// (session, regions) -> the holds ended
    caf::replies_to<done_with_atom, session_key, std::vector<region_handle>>::with<std::uint64_t>,
    /// (session, regions) -> the discards queued: the contents are not needed
    caf::replies_to<dead_atom, session_key, std::vector<region_handle>>::with<residency_result>,
    /// (session, region) -> advice and last prefetch location, as the serving node reads them
    caf::replies_to<attributes_atom, session_key, region_handle>::with<remote_attributes>,
    /// -> the allocator's, the supervisor's and the gateway's counters
    caf::replies_to<stats_atom>::with<remote_stats>,
    /// (session, page) -> one page of the regions leased by this session, with their attributes
    /// (read for the page's rows only)
    caf::replies_to<leased_regions_atom, session_key, region_page>::with<remote_region_page>,
    /// (operator, page) -> one page of every region of the current allocator incarnation;
    /// attributes for the leased rows of the page
    caf::replies_to<regions_atom, operator_key, region_page>::with<remote_region_page>,
    /// (0) -> the quota in force; any other value is refused: setting needs the operator key
    sig::quota,
    /// (operator, bytes) -> the quota now in force; 0 reads it. invalid_argument when below the
    /// live bytes or above the ceiling the serving node was started with
    caf::replies_to<set_quota_atom, operator_key, std::uint64_t>::with<std::uint64_t>,
    /// (operator) -> the supervisor's explicit restart: the new generation; every lease of the
    /// old generation goes stale (allocator_stopped). invalid_argument for a wrong key, and
    /// nothing restarts
    caf::replies_to<restart_atom, operator_key>::with<std::uint64_t>,
    /// (operator) -> the allocator's snapshot (regions with policy, advice, last prefetch and the
    /// session leasing each; counters; event history); invalid_argument for a wrong key, and
    /// nothing is read; allocator_stopped when the supervisor stopped
    caf::replies_to<snapshot_atom, operator_key>::with<remote_snapshot>,
    /// (session, region) -> never succeeds: not_supported, because managed memory cannot be
    /// exported over CUDA IPC. The reply type is what a cudaIpcMemHandle_t would have been.
    caf::replies_to<export_ipc_atom, session_key, region_handle>::with<std::vector<char>>>;

}  // namespace uma
