#include <uma/memory/memory_resource.hpp>

#include <bit>
#include <string>

#include <uma/sys/error.hpp>

namespace uma {

void memory_resource::validate(const allocation_request& r) {
  if (r.bytes == 0)
    raise(errc::invalid_argument, "allocate: zero-size request; uma hands out no empty regions");
  if (!std::has_single_bit(r.alignment))
    raise(errc::invalid_argument,
          "allocate: alignment " + std::to_string(r.alignment) + " is not a power of two");
  if (!allocatable(r.kind))
    raise(errc::invalid_argument, "allocate: " + std::string(to_string(r.kind)) +
                                      " is not a kind uma allocates (cuda_managed, pinned_host "
                                      "or cuda_device)");
  if (r.kind == memory_kind::cuda_device && r.device < 0)
    raise(errc::invalid_argument,
          "allocate: device memory needs a device, not " + std::to_string(r.device));
}

allocation memory_resource::allocate(const allocation_request& r) {
  validate(r);
  return do_allocate(r);
}

}  // namespace uma
