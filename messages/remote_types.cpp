#include <uma/messages/remote_types.hpp>

namespace uma {

std::string to_string(const region_handle& h) {
  return "region " + std::to_string(h.id) + " of generation " + std::to_string(h.generation);
}

std::string to_hex(const operator_key& k) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (const auto word : {k.secret_hi, k.secret_lo})
    for (int shift = 60; shift >= 0; shift -= 4)
      out.push_back(digits[(word >> shift) & 0xf]);
  return out;
}

std::optional<operator_key> parse_operator_key(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.remove_suffix(1);
  if (text.size() != 32)
    return std::nullopt;
  operator_key k;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    std::uint64_t v = 0;
    if (c >= '0' && c <= '9')
      v = static_cast<std::uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v = static_cast<std::uint64_t>(c - 'a' + 10);
    else
      return std::nullopt;
    auto& word = i < 16 ? k.secret_hi : k.secret_lo;
    word = (word << 4) | v;
  }
  return k;
}

remote_op_result to_remote(const op_result& r) {
  return {r.ranges, r.bytes, r.completed, r.backend_ranges};
}

remote_attributes to_remote(const range_attributes& a) {
  remote_attributes out;
  out.read_mostly = a.read_mostly;
  out.has_preferred_location = a.preferred_location.has_value();
  if (a.preferred_location)
    out.preferred_location = *a.preferred_location;
  out.accessed_by = a.accessed_by;
  out.has_last_prefetch_location = a.last_prefetch_location.has_value();
  if (a.last_prefetch_location)
    out.last_prefetch_location = *a.last_prefetch_location;
  return out;
}

range_attributes to_local(const remote_attributes& a) {
  range_attributes out;
  out.read_mostly = a.read_mostly;
  if (a.has_preferred_location)
    out.preferred_location = a.preferred_location;
  out.accessed_by = a.accessed_by;
  if (a.has_last_prefetch_location)
    out.last_prefetch_location = a.last_prefetch_location;
  return out;
}

remote_snapshot to_remote(const allocator_snapshot& s) {
  remote_snapshot out{s.taken_at_ns, s.generation,     s.backend,       s.stats, {},
                      s.events,      s.events_dropped, s.event_capacity};
  out.regions.reserve(s.regions.size());
  for (const auto& r : s.regions)
    out.regions.push_back({r.info, r.policy, r.advice, r.last_prefetch.has_value(),
                           r.last_prefetch.value_or(location::host()), 0});
  return out;
}

allocator_snapshot to_local(const remote_snapshot& s) {
  allocator_snapshot out{s.taken_at_ns, s.generation,     s.backend,       s.stats, {},
                         s.events,      s.events_dropped, s.event_capacity};
  out.regions.reserve(s.regions.size());
  for (const auto& r : s.regions) {
    out.regions.push_back({r.info, r.policy, r.advice, std::nullopt});
    if (r.has_last_prefetch)
      out.regions.back().last_prefetch = r.last_prefetch;
  }
  return out;
}

}  // namespace uma
