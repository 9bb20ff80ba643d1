#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <uma/memory/managed_ref.hpp>
#include <uma/messages/requests.hpp>
#include <uma/sys/backend.hpp>

namespace uma::detail {

// Request validation shared by the allocator's handlers (internal: it reads region records).

/// Refuses (invalid_argument naming `what`) memory of a tier (pinned_host, cuda_device): it
/// never migrates, takes no advice and is in no plan (docs/design.md "Tiers").
void check_migrates(const region& home, const char* what);

/// Every ref must be non-empty, of the incarnation `own`, managed memory (check_migrates), and
/// no two may overlap. Throws
/// `invalid_argument` (empty, another allocator's, a tier's, overlapping) or `allocator_stopped`
/// (an inert ref; counted in `inert_refusals`), naming the operation and the ref's position.
void check_refs(std::span<const byte_ref> refs, const char* op, const control_block& own,
                std::uint64_t& inert_refusals);

/// Stream-ordered work must not be enqueued into a capture: a prefetch there fails and
/// invalidates the caller's capture, so it is refused before anything is enqueued. The host
/// backend takes no stream at all.
void check_stream(backend& b, stream_view stream, const char* op);

/// A prefetch names one location (broadcast) or one per ref, each one `b` can prefetch to;
/// else invalid_argument naming `op`.
void check_targets(const backend& b, const prefetch_request& r, const char* op);

/// The byte ranges of `refs`, in order.
[[nodiscard]] std::vector<byte_range> ranges_of(std::span<const byte_ref> refs);

/// The reply of a stream-ordered request over `ranges`.
[[nodiscard]] op_result summarize(std::span<const byte_range> ranges, completion when);

}  // namespace uma::detail
