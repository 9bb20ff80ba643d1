#pragma once

// The names a typed handle is made of (messages/handles.hpp): every message type declared, and
// the atoms of the request signatures as the types CAF_ADD_ATOM gives them. Nothing here is
// defined and nothing needs CAF's atom or type-id headers (<caf/atom.hpp> brings <functional>,
// <set> and the type-id machinery, a third of what <uma/actors/client.hpp> would preprocess).
// messages/atoms.hpp declares the same atoms with CAF_ADD_ATOM, gives them their values
// (`allocate_atom_v`) and every type its type id; an alias declared twice must name the same
// type both times, so the compiler checks each text written here against that one.

#include <cstddef>
#include <cstdint>
#include <memory>

#include <caf/detail/atom_val.hpp>
#include <caf/fwd.hpp>

namespace caf {
// Defined in <caf/atom.hpp> (messages/atoms.hpp includes it): naming a specialization needs
// only this declaration.
template <atom_value V>
struct atom_constant;
}  // namespace caf

namespace uma {

// sys/ and memory/
enum class memory_kind : std::uint8_t;
struct location;
struct range_attributes;
struct allocator_stats;
struct region_info;
struct allocator_snapshot;
class allocation_handoff;
class block_allocator;
template <class T>
class ManagedRef;
using byte_ref = ManagedRef<std::byte>;
using block_allocator_ref = std::shared_ptr<block_allocator>;
// messages/memory_requests.hpp, messages/requests.hpp, messages/caller_calls.hpp
struct allocate_request;
struct prefetch_request;
struct discard_request;
struct advise_request;
struct op_result;
struct access_plan_request;
struct residency_result;
struct residency_report;
struct address_range;
class caller_calls;
using caller_calls_ref = std::shared_ptr<caller_calls>;
// messages/supervision_types.hpp
struct supervision_stats;
struct restart_event;
// messages/remote_types.hpp
struct region_handle;
struct remote_allocate_request;
struct remote_prefetch_request;
struct remote_discard_request;
struct remote_advise_request;
struct remote_op_result;
struct remote_attributes;
struct remote_stats;
struct remote_region_info;
struct remote_snapshot;
struct remote_access_plan;

namespace detail {

/// The atom value of `text`: what caf::atom(text) returns, through the same encoding
/// (caf::detail::atom_val), without <caf/atom.hpp>.
template <std::size_t N>
consteval caf::atom_value atom_of(const char (&text)[N]) {
  static_assert(N <= 11, "a CAF 0.17 atom has at most 10 characters");
  return static_cast<caf::atom_value>(caf::detail::atom_val(text));
}

}  // namespace detail

// The atoms of the request signatures (messages/handles.hpp), as CAF_ADD_ATOM in
// messages/atoms.hpp declares them.
using allocate_atom = caf::atom_constant<detail::atom_of("allocate")>;
using prefetch_atom = caf::atom_constant<detail::atom_of("prefetch")>;
using discard_atom = caf::atom_constant<detail::atom_of("discard")>;
using discard_prefetch_atom = caf::atom_constant<detail::atom_of("disc_pref")>;
using advise_atom = caf::atom_constant<detail::atom_of("advise")>;
using attributes_atom = caf::atom_constant<detail::atom_of("attributes")>;
using stats_atom = caf::atom_constant<detail::atom_of("stats")>;
using memory_kind_atom = caf::atom_constant<detail::atom_of("mem_kind")>;
using can_access_atom = caf::atom_constant<detail::atom_of("can_access")>;
using regions_atom = caf::atom_constant<detail::atom_of("regions")>;
using flush_atom = caf::atom_constant<detail::atom_of("flush")>;
using trim_atom = caf::atom_constant<detail::atom_of("trim")>;
using quota_atom = caf::atom_constant<detail::atom_of("quota")>;
using blocks_atom = caf::atom_constant<detail::atom_of("blocks")>;
using calls_atom = caf::atom_constant<detail::atom_of("calls")>;
using snapshot_atom = caf::atom_constant<detail::atom_of("snapshot")>;
using will_access_atom = caf::atom_constant<detail::atom_of("will_acc")>;
using done_with_atom = caf::atom_constant<detail::atom_of("done_with")>;
using done_ranges_atom = caf::atom_constant<detail::atom_of("done_range")>;
using dead_atom = caf::atom_constant<detail::atom_of("dead")>;
using dead_ranges_atom = caf::atom_constant<detail::atom_of("dead_range")>;
using budget_atom = caf::atom_constant<detail::atom_of("budget")>;
using tenant_budget_atom = caf::atom_constant<detail::atom_of("tenant_bud")>;
using residency_atom = caf::atom_constant<detail::atom_of("residency")>;
using supervision_atom = caf::atom_constant<detail::atom_of("supervise")>;
using restart_atom = caf::atom_constant<detail::atom_of("restart")>;
using subscribe_atom = caf::atom_constant<detail::atom_of("observe")>;
using unsubscribe_atom = caf::atom_constant<detail::atom_of("unobserve")>;
using restarted_atom = caf::atom_constant<detail::atom_of("restarted")>;

}  // namespace uma
