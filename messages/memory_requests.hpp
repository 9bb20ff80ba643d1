#pragma once

// The requests that act on memory (allocate, prefetch, discard, advise) and their reply: what
// the facade's own declarations need. The residency requests are in messages/requests.hpp.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <uma/memory/managed_ref.hpp>
#include <uma/sys/advice.hpp>
#include <uma/sys/location.hpp>
#include <uma/sys/memory_kind.hpp>
#include <uma/sys/vocabulary.hpp>

namespace uma {

/// Allocate `count` elements of `element_size` bytes. The byte size is checked for overflow and
/// zero before anything is allocated.
struct allocate_request {
  std::size_t count = 0;
  std::size_t element_size = 1;
  std::size_t alignment = 0;  ///< power of two; 0 means the backend's natural alignment
  attach_flag attach = attach_flag::global;
  stream_view stream{};  ///< checked for graph capture (managed allocation cannot be captured)
  std::string label{};   ///< shows in the region report
  /// Managed memory (the default) or a tier's: `pinned_host` (the host tier) or `cuda_device`
  /// (device memory on `device`, charged to its budget); docs/design.md "Tiers".
  memory_kind kind = memory_kind::cuda_managed;
  int device = 0;  ///< the device of `cuda_device` memory
};

/// When a stream-ordered request replies.
enum class completion : std::uint8_t {
  enqueued,  ///< once the work is queued on the stream (default)
  complete,  ///< once the stream has finished it (host callback)
};

/// Prefetch (or discard-and-prefetch) `refs` to `locations`: one location is broadcast to
/// every ref, otherwise locations pair with refs by index and the lengths must match.
struct prefetch_request {
  std::vector<byte_ref> refs{};
  std::vector<location> locations{};
  stream_view stream{};
  completion reply_when = completion::enqueued;
};

/// Discard the contents of `refs` (their pages read back undefined until written).
struct discard_request {
  std::vector<byte_ref> refs{};
  stream_view stream{};
  completion reply_when = completion::enqueued;
};

/// Apply `what` (with `where`, for advice that takes a location) to every ref.
struct advise_request {
  std::vector<byte_ref> refs{};
  advice what = advice::set_read_mostly;
  location where = location::host();
};

/// Reply to prefetch / discard / discard_prefetch / advise: what was done.
struct op_result {
  std::uint64_t ranges = 0;          ///< ranges acted on
  std::uint64_t bytes = 0;           ///< bytes covered
  bool completed = false;            ///< true when the reply waited for stream completion
  std::uint64_t backend_ranges = 0;  ///< ranges passed to the backend after coalescing/elision
  friend bool operator==(const op_result&, const op_result&) = default;
};

}  // namespace uma
