#include <uma/sys/location.hpp>

namespace uma {

std::string to_string(const location& loc) {
  switch (loc.type) {
    case location::kind::device:
      return "device " + std::to_string(loc.id);
    case location::kind::host:
      return "host";
    case location::kind::host_numa:
      return "host numa " + std::to_string(loc.id);
    case location::kind::host_numa_current:
      return "host numa current";
  }
  return "location(" + std::to_string(static_cast<int>(loc.type)) + ")";
}

}  // namespace uma
