#include <uma/actors/detail/request_checks.hpp>

#include <algorithm>
#include <string>
#include <utility>

#include <uma/memory/location_rules.hpp>
#include <uma/sys/detail/format.hpp>

namespace uma::detail {

void check_migrates(const region& home, const char* what) {
  if (home.kind != memory_kind::cuda_managed)
    raise(errc::invalid_argument,
          std::string(what) + " (region " + std::to_string(home.id) + ") is " +
              std::string(to_string(home.kind)) +
              " memory, a tier: it never migrates, takes no advice and is in no plan; move its "
              "bytes with a copy (docs/design.md \"Tiers\")");
}

void check_refs(std::span<const byte_ref> refs, const char* op, const control_block& own,
                std::uint64_t& inert_refusals) {
  if (refs.empty())
    raise(errc::invalid_argument, std::string(op) + ": no refs given");
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const auto& ref = refs[i];
    const auto where = std::string(op) + ": ref #" + std::to_string(i);
    if (ref.empty())
      raise(errc::invalid_argument, where + " is empty");
    const auto* r = record_of(ref);
    if (r->control.get() != &own) {
      if (!r->control->alive()) {
        ++inert_refusals;
        raise(errc::allocator_stopped, where + " (region " + std::to_string(r->id) +
                                           ", generation " + std::to_string(ref.generation()) +
                                           ") is inert: its allocator has stopped");
      }
      raise(errc::invalid_argument, where + " (region " + std::to_string(r->id) +
                                        ") belongs to another allocator (generation " +
                                        std::to_string(ref.generation()) + ")");
    }
    check_migrates(*r->home, where.c_str());
  }
  if (refs.size() < 2)
    return;
  std::vector<const byte_ref*> sorted;
  sorted.reserve(refs.size());
  for (const auto& ref : refs)
    sorted.push_back(&ref);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) {
    return std::pair(a->id(), a->byte_offset()) < std::pair(b->id(), b->byte_offset());
  });
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    const auto* a = sorted[i - 1];
    const auto* b = sorted[i];
    if (a->id() == b->id() && b->byte_offset() < a->byte_offset() + a->bytes())
      raise(errc::invalid_argument, std::string(op) + ": region " + std::to_string(a->id()) +
                                        " appears twice (overlapping ranges at byte offsets " +
                                        std::to_string(a->byte_offset()) + " and " +
                                        std::to_string(b->byte_offset()) + ")");
  }
}

void check_targets(const backend& b, const prefetch_request& r, const char* op) {
  if (r.locations.empty() || (r.locations.size() != 1 && r.locations.size() != r.refs.size()))
    raise(errc::invalid_argument,
          std::string(op) + ": " + std::to_string(r.refs.size()) + " refs but " +
              std::to_string(r.locations.size()) +
              " locations (give one location to broadcast, or one per ref)");
  for (const auto& loc : r.locations)
    validate_location(b, location_use::prefetch, loc);
}

void check_stream(backend& b, stream_view stream, const char* op) {
  if (stream.handle == nullptr)
    return;
  if (b.kind() == backend_kind::host)
    raise(errc::invalid_argument, std::string(op) + ": stream " + detail::hex(stream.handle) +
                                      " given, but the host backend has no CUDA streams");
  if (b.is_capturing(stream))
    raise(errc::capture_in_progress, std::string(op) + ": stream " + detail::hex(stream.handle) +
                                         " is capturing a graph; uma does not enqueue managed "
                                         "memory operations into a capture");
}

std::vector<byte_range> ranges_of(std::span<const byte_ref> refs) {
  std::vector<byte_range> out;
  out.reserve(refs.size());
  for (const auto& ref : refs)
    out.push_back(ref.range());
  return out;
}

op_result summarize(std::span<const byte_range> ranges, completion when) {
  op_result res;
  res.ranges = ranges.size();
  for (const auto& r : ranges)
    res.bytes += r.bytes;
  res.completed = when == completion::complete;
  return res;
}

}  // namespace uma::detail
