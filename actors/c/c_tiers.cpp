// The C ABI's tiers and copies (actors/c/uma.h, docs/c_abi.md "Tiers and copies"): the host
// tier and device memory held by the allocator, and copies between any of its memory.

#include <uma/actors/c/c_guard.hpp>
#include <uma/memory/copy.hpp>

using uma::c::guarded;
using uma::c::require;

namespace {

/// What uma_host_alloc and uma_device_alloc share: a size of 0 gives NULL and UMA_OK.
uma_status allocate_tier(uma_allocator* a, size_t size, uma::memory_kind kind, int device,
                         void** out, const char* what) {
  return guarded([&] {
    require(a, (std::string(what) + ": allocator").c_str());
    require(out, (std::string(what) + ": out").c_str());
    *out = nullptr;
    if (size == 0)
      return UMA_OK;
    if (kind == uma::memory_kind::cuda_device &&
        (device < 0 || device >= a->backend->device_count()))
      throw uma::c::status_error(UMA_ERR_INVALID_ARGUMENT,
                                 std::string(what) + ": device " + std::to_string(device) +
                                     " is not a device 0 to " +
                                     std::to_string(a->backend->device_count() - 1) + " of the " +
                                     std::string(uma::to_string(a->backend->kind())) + " backend");
    *out = a->allocate_tier(size, kind, device);
    return UMA_OK;
  });
}

}  // namespace

extern "C" {

uma_status uma_host_alloc(uma_allocator* a, size_t size, void** out) {
  return allocate_tier(a, size, uma::memory_kind::pinned_host, 0, out, "uma_host_alloc");
}

uma_status uma_device_alloc(uma_allocator* a, size_t size, int device, void** out) {
  return allocate_tier(a, size, uma::memory_kind::cuda_device, device, out, "uma_device_alloc");
}

uma_status uma_tier_free(uma_allocator* a, void* ptr) {
  return guarded([&] {
    require(a, "uma_tier_free: allocator");
    if (ptr == nullptr)
      return UMA_OK;  // what a size of 0 gave
    a->release_tier(ptr);
    return UMA_OK;
  });
}

uma_status uma_copy(uma_allocator* a, void* dst, const void* src, size_t bytes, uma_stream stream) {
  return guarded([&] {
    require(a, "uma_copy: allocator");
    if (bytes == 0)
      return UMA_OK;
    require(dst, "uma_copy: dst");
    require(src, "uma_copy: src");
    const auto to = a->ref_of(dst, bytes);
    const auto from = a->ref_of(src, bytes);
    uma::copy(to, from, a->stream_of(stream));
    return UMA_OK;
  });
}

}  // extern "C"
