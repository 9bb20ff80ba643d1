#pragma once

// uma's message vocabulary: the atoms (with their values, `allocate_atom_v`) and the type ids
// of every message type, local and remote, in one CAF type-id block (one block: the ids are
// consecutive). The types are only declared (messages/names.hpp, which also names the atoms a
// handle needs without CAF's atom header); their definitions are where each role needs them:
// the allocator's interface (messages/interface.hpp), the remote one
// (messages/remote_interface.hpp), supervision (messages/supervision_types.hpp). So that a
// header naming a handle (messages/handles.hpp, <uma/actors/client.hpp>) pulls in none of them,
// nor this header.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/type_id.hpp>

#include <uma/messages/names.hpp>

// names.hpp computes atom values as caf::atom does (and each CAF_ADD_ATOM below that redeclares
// one of its atoms checks the text): the two encodings agree.
static_assert(uma::detail::atom_of("allocate") == caf::atom("allocate"));

// uma's message vocabulary. Atom texts are CAF 0.17 atoms (at most 10 characters).
CAF_BEGIN_TYPE_ID_BLOCK(uma, caf::first_custom_type_id)

CAF_ADD_ATOM(uma, uma, allocate_atom, "allocate")
CAF_ADD_ATOM(uma, uma, release_atom, "release")  // the remote interface: a lease given back
CAF_ADD_ATOM(uma, uma, prefetch_atom, "prefetch")
CAF_ADD_ATOM(uma, uma, discard_atom, "discard")
CAF_ADD_ATOM(uma, uma, discard_prefetch_atom, "disc_pref")
CAF_ADD_ATOM(uma, uma, advise_atom, "advise")
CAF_ADD_ATOM(uma, uma, attributes_atom, "attributes")
CAF_ADD_ATOM(uma, uma, stats_atom, "stats")
CAF_ADD_ATOM(uma, uma, memory_kind_atom, "mem_kind")
CAF_ADD_ATOM(uma, uma, can_access_atom, "can_access")
CAF_ADD_ATOM(uma, uma, regions_atom, "regions")
CAF_ADD_ATOM(uma, uma, flush_atom, "flush")
CAF_ADD_ATOM(uma, uma, trim_atom, "trim")
CAF_ADD_ATOM(uma, uma, job_done_atom, "uma_done")
CAF_ADD_ATOM(uma, uma, supervision_atom, "supervise")
CAF_ADD_ATOM(uma, uma, respawn_atom, "respawn")
CAF_ADD_ATOM(uma, uma, quota_atom, "quota")
CAF_ADD_ATOM(uma, uma, open_session_atom, "open_sess")
CAF_ADD_ATOM(uma, uma, close_session_atom, "close_sess")
CAF_ADD_ATOM(uma, uma, export_ipc_atom, "export_ipc")
CAF_ADD_ATOM(uma, uma, blocks_atom, "blocks")
CAF_ADD_ATOM(uma, uma, restart_atom, "restart")
CAF_ADD_ATOM(uma, uma, subscribe_atom, "observe")
CAF_ADD_ATOM(uma, uma, unsubscribe_atom, "unobserve")
CAF_ADD_ATOM(uma, uma, restarted_atom, "restarted")

CAF_ADD_TYPE_ID(uma, (uma::allocate_request))
CAF_ADD_TYPE_ID(uma, (uma::prefetch_request))
CAF_ADD_TYPE_ID(uma, (uma::discard_request))
CAF_ADD_TYPE_ID(uma, (uma::advise_request))
CAF_ADD_TYPE_ID(uma, (uma::op_result))
CAF_ADD_TYPE_ID(uma, (uma::byte_ref))
CAF_ADD_TYPE_ID(uma, (uma::location))
CAF_ADD_TYPE_ID(uma, (uma::range_attributes))
CAF_ADD_TYPE_ID(uma, (uma::allocator_stats))
CAF_ADD_TYPE_ID(uma, (uma::memory_kind))
CAF_ADD_TYPE_ID(uma, (std::vector<uma::region_info>))
CAF_ADD_TYPE_ID(uma, (uma::supervision_stats))
// The remote-safe interface (messages/remote_interface.hpp): inspectable, registered by
// register_types, so they serialize.
CAF_ADD_TYPE_ID(uma, (uma::region_handle))
CAF_ADD_TYPE_ID(uma, (uma::remote_allocate_request))
CAF_ADD_TYPE_ID(uma, (uma::remote_prefetch_request))
CAF_ADD_TYPE_ID(uma, (uma::remote_discard_request))
CAF_ADD_TYPE_ID(uma, (uma::remote_advise_request))
CAF_ADD_TYPE_ID(uma, (uma::remote_op_result))
CAF_ADD_TYPE_ID(uma, (uma::remote_attributes))
CAF_ADD_TYPE_ID(uma, (uma::remote_stats))
CAF_ADD_TYPE_ID(uma, (std::vector<uma::remote_region_info>))
CAF_ADD_TYPE_ID(uma, (uma::block_allocator_ref))
CAF_ADD_TYPE_ID(uma, (uma::restart_event))
// Local to one allocator: the reply of its own pool-growth job (actors/managed_allocator.cpp).
CAF_ADD_TYPE_ID(uma, (uma::allocation_handoff))
// Snapshots (`uma snapshot`): the allocator's reply is local-only (its optional last prefetch
// has no CAF 0.17 serialization); the remote interface replies its wire form, remote_snapshot.
CAF_ADD_ATOM(uma, uma, snapshot_atom, "snapshot")
CAF_ADD_TYPE_ID(uma, (uma::allocator_snapshot))
CAF_ADD_TYPE_ID(uma, (uma::remote_snapshot))
// Local to one allocator: its release tick (actors/managed_allocator.cpp).
CAF_ADD_ATOM(uma, uma, release_tick_atom, "rel_tick")
// Residency (issue 15, docs/residency.md): local only, the plans carry refs.
CAF_ADD_ATOM(uma, uma, will_access_atom, "will_acc")
CAF_ADD_ATOM(uma, uma, done_with_atom, "done_with")
CAF_ADD_ATOM(uma, uma, dead_atom, "dead")
CAF_ADD_ATOM(uma, uma, budget_atom, "budget")
CAF_ADD_ATOM(uma, uma, residency_atom, "residency")
// One atom, one meaning: a tenant's budget is not a device's budget with one more argument.
CAF_ADD_ATOM(uma, uma, tenant_budget_atom, "tenant_bud")
// Internal to one allocator (its private extension, actors/managed_allocator.cpp): the last drop
// of a live region's refs wakes the actor to drain its release queue.
CAF_ADD_ATOM(uma, uma, wake_atom, "wake")
CAF_ADD_TYPE_ID(uma, (uma::access_plan_request))
CAF_ADD_TYPE_ID(uma, (uma::residency_result))
CAF_ADD_TYPE_ID(uma, (uma::residency_report))
CAF_ADD_TYPE_ID(uma, (std::vector<uma::byte_ref>))
// Residency over the remote interface: a session's plans name leased regions.
CAF_ADD_TYPE_ID(uma, (uma::remote_access_plan))
CAF_ADD_TYPE_ID(uma, (std::vector<uma::region_handle>))
// Plans by address range (issue 25): local only, addresses never cross a process boundary.
// done_with and dead by address range: one atom per request (the interface's rule).
CAF_ADD_ATOM(uma, uma, done_ranges_atom, "done_range")
CAF_ADD_ATOM(uma, uma, dead_ranges_atom, "dead_range")
CAF_ADD_TYPE_ID(uma, (std::vector<uma::address_range>))
// The remote interface, one atom per request (issue 23): a tenant's session opened by the
// serving node's wire is not a peer's open_session with one more argument, a session's own
// regions are not every region, and setting the quota (operator) is not reading it.
CAF_ADD_ATOM(uma, uma, open_tenant_session_atom, "tenant_ses")
CAF_ADD_ATOM(uma, uma, leased_regions_atom, "leased")
CAF_ADD_ATOM(uma, uma, set_quota_atom, "set_quota")
// Calls on the caller's thread (issue 23, messages/caller_calls.hpp): local only.
CAF_ADD_ATOM(uma, uma, calls_atom, "calls")
CAF_ADD_TYPE_ID(uma, (uma::caller_calls_ref))
// Internal to one allocator (its private extension): a caller's backend call failed in a way
// that ends the incarnation (sys/error.hpp is_fatal), as a lane's job would.
CAF_ADD_ATOM(uma, uma, fault_atom, "fault")

CAF_END_TYPE_ID_BLOCK(uma)

// Local-only message types: they carry refs, raw streams or pointers, which never cross a
// process boundary (the remote-safe interface has its own serializable types).
// `location` and `allocator_stats` are not listed: they are plain inspectable values that the
// remote types embed, and CAF 0.17 silently skips a field whose type is listed here.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(uma::allocate_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(uma::prefetch_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(uma::discard_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(uma::advise_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(uma::op_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(uma::range_attributes)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(uma::memory_kind)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<uma::region_info>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(uma::supervision_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(uma::block_allocator_ref)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(uma::caller_calls_ref)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(uma::allocation_handoff)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(uma::allocator_snapshot)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(uma::access_plan_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(uma::residency_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<uma::address_range>)

// A ref of any element type, and a vector of them, is a local-only message type: actors send
// `ManagedRef<float>` as they send `byte_ref`, with no registration of their own (issue 24: one
// missing specialization was a 1,000-line compile error). Refs never serialize; the remote
// interface names regions by id (messages/remote_types.hpp).
namespace caf {
template <class T>
struct allowed_unsafe_message_type<uma::ManagedRef<T>> : std::true_type {};
template <class T>
struct allowed_unsafe_message_type<std::vector<uma::ManagedRef<T>>> : std::true_type {};
}  // namespace caf
