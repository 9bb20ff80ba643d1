#include <uma/memory/location_rules.hpp>

#include <string>

#include <uma/sys/error.hpp>

namespace uma {

namespace {

const char* name(location_use use) {
  switch (use) {
    case location_use::prefetch:
      return "prefetch";
    case location_use::preferred_location:
      return "preferred location";
    case location_use::accessed_by:
      return "accessed_by";
    case location_use::can_access:
      return "can_access";
  }
  return "location";
}

[[noreturn]] void reject(location_use use, const location& loc, const std::string& why) {
  raise(errc::invalid_argument,
        std::string(name(use)) + " to " + to_string(loc) + " is not allowed: " + why);
}

}  // namespace

void validate_location(const backend& b, location_use use, const location& loc) {
  switch (loc.type) {
    case location::kind::device:
      if (loc.id < 0 || loc.id >= b.device_count())
        reject(use, loc,
               "the " + std::string(to_string(b.kind())) + " backend has " +
                   std::to_string(b.device_count()) +
                   (b.kind() == backend_kind::host ? " emulated" : "") + " device(s)");
      return;
    case location::kind::host:
      if (use == location_use::accessed_by)
        reject(use, loc, "accessed_by takes a device only");
      return;
    case location::kind::host_numa:
    case location::kind::host_numa_current:
      if (use == location_use::accessed_by)
        reject(use, loc, "accessed_by takes a device only");
      if (use == location_use::can_access)
        reject(use, loc, "can_access takes a device or host, not a NUMA node");
      if (loc.type == location::kind::host_numa && (loc.id < 0 || loc.id >= b.host_numa_nodes()))
        reject(use, loc, "the host has " + std::to_string(b.host_numa_nodes()) + " NUMA node(s)");
      return;
  }
  reject(use, loc, "unknown location kind " + std::to_string(static_cast<int>(loc.type)));
}

void validate_advice(const backend& b, advice a, const location& loc) {
  switch (a) {
    case advice::set_preferred_location:
      validate_location(b, location_use::preferred_location, loc);
      return;
    case advice::set_accessed_by:
    case advice::unset_accessed_by:
      validate_location(b, location_use::accessed_by, loc);
      return;
    case advice::set_read_mostly:
    case advice::unset_read_mostly:
    case advice::unset_preferred_location:
      return;
  }
  raise(errc::invalid_argument, "advise: unknown advice " + std::to_string(static_cast<int>(a)));
}

}  // namespace uma
