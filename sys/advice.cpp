#include <uma/sys/advice.hpp>

namespace uma {

std::string_view to_string(advice a) noexcept {
  switch (a) {
    case advice::set_read_mostly:
      return "set_read_mostly";
    case advice::unset_read_mostly:
      return "unset_read_mostly";
    case advice::set_preferred_location:
      return "set_preferred_location";
    case advice::unset_preferred_location:
      return "unset_preferred_location";
    case advice::set_accessed_by:
      return "set_accessed_by";
    case advice::unset_accessed_by:
      return "unset_accessed_by";
  }
  return "unknown_advice";
}

}  // namespace uma
