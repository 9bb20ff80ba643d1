#include <uma/memory/backend_resource.hpp>

#include <algorithm>

#include <uma/sys/detail/format.hpp>
#include <uma/sys/error.hpp>

namespace uma {

backend_resource::backend_resource(std::shared_ptr<backend> b)
    : backend_(std::move(b)),
      props_{backend_->guaranteed_alignment(),
             std::max<std::size_t>(backend_->guaranteed_alignment(), 4096)} {}

std::size_t backend_resource::do_charge_for(std::size_t bytes, std::size_t alignment) const {
  const std::size_t padding = alignment > props_.alignment ? alignment - props_.alignment : 0;
  if (bytes > SIZE_MAX - padding)
    raise(errc::overflow, "allocate: " + detail::bytes(bytes) + " plus " + detail::bytes(padding) +
                              " of alignment padding overflow size_t");
  return bytes + padding;
}

allocation backend_resource::do_allocate(const allocation_request& r) {
  const std::size_t charged = do_charge_for(r.bytes, r.alignment);
  void* base = r.kind == memory_kind::cuda_managed
                   ? backend_->allocate_managed(charged, r.attach)
                   : backend_->allocate_tier(r.kind, charged, r.device);
  auto* data = static_cast<std::byte*>(base);
  data += (r.alignment - reinterpret_cast<std::uintptr_t>(data) % r.alignment) % r.alignment;
  return {base, data, r.bytes, charged, r.kind, r.device};
}

void backend_resource::do_deallocate(const allocation& a) noexcept {
  if (a.kind == memory_kind::cuda_managed)
    backend_->free_managed(a.base, a.charged);
  else
    backend_->free_tier(a.kind, a.base, a.charged, a.device);
}

}  // namespace uma
