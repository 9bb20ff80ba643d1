#include <uma/messages/remote_types.hpp>

namespace uma {

std::string to_string(const region_handle& h) {
  return "region " + std::to_string(h.id) + " of generation " + std::to_string(h.generation);
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

}  // namespace uma
