#pragma once

// Copies between memory one allocator owns, on the copy engines (docs/design.md "Tiers"): the
// host tier (pinned host memory) to device memory or managed memory and back. No message: the
// copy is enqueued on the caller's thread, and counted in the incarnation's copy ledger.

#include <uma/memory/managed_ref.hpp>
#include <uma/sys/vocabulary.hpp>

namespace uma {

/// Copies `src`'s bytes into `dst` in `stream`'s order (CUDA: cudaMemcpyAsync; returns once
/// enqueued; the host backend copies before it returns) and counts them by direction in the
/// incarnation's ledger. Both refs are pinned for the call, so neither is freed while it is
/// enqueued; keep them alive until `stream` has run the copy (uma frees a region only after the
/// device synchronized). Throws, copying nothing: `invalid_argument` for an empty ref or refs of
/// two allocators, then `allocator_stopped` for an inert ref, then `invalid_argument` for
/// different sizes or overlapping bytes; and the backend's error.
void copy(const byte_ref& dst, const byte_ref& src, stream_view stream = {});

}  // namespace uma
