// The CUDA backend's tiers and copies (docs/design.md "Tiers"): page-locked host memory
// (cudaHostAlloc) and plain device memory (cudaMalloc) that the allocator owns beside its
// managed memory, and copies between them on the copy engines (cudaMemcpyAsync). Measured on an
// H100 (bench/python/staging_probe.py): pinned host <-> cudaMalloc memory moves 55 GB/s each way
// and leaves a GEMM beside it at 1.04x; a copy into managed memory resident on the device moves
// 34 GB/s and slows that GEMM 7.5x, which is why staging is device memory, not managed.

#include <optional>
#include <string>

#include <uma/sys/cuda_backend_impl.hpp>
#include <uma/sys/cuda_check.hpp>
#include <uma/sys/log.hpp>

namespace uma::detail {

void* cuda_backend::allocate_tier(memory_kind kind, std::size_t bytes, int device) {
  if (kind != memory_kind::pinned_host && kind != memory_kind::cuda_device)
    raise(errc::invalid_argument, "cuda allocate_tier: " + std::string(to_string(kind)) +
                                      " is not a tier (pinned_host or cuda_device)");
  if (bytes == 0)
    raise(errc::invalid_argument, "cuda allocate_tier: zero bytes requested");
  void* ptr = nullptr;
  if (kind == memory_kind::pinned_host) {
    // Portable: every context may copy from it, whichever device is current on the copying
    // thread.
    UMA_CUDA_CHECK(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable),
                   "allocating " + describe_bytes(bytes) + " of page-locked host memory");
  } else {
    static_cast<void>(capabilities(device));  // invalid_argument for a device it does not have
    const device_guard keep;
    UMA_CUDA_CHECK(cudaSetDevice(device), "making device " + std::to_string(device) + " current");
    UMA_CUDA_CHECK(cudaMalloc(&ptr, bytes), "allocating " + describe_bytes(bytes) +
                                                " of device memory on device " +
                                                std::to_string(device));
  }
  try {
    const std::lock_guard lock(live_mutex_);
    tiers_.emplace(ptr, tier_record{kind, bytes, device});
    bump(counters_.live_allocations);
    bump(counters_.live_bytes, bytes);
  } catch (...) {
    static_cast<void>(kind == memory_kind::pinned_host ? cudaFreeHost(ptr) : cudaFree(ptr));
    throw;
  }
  bump(counters_.tier_allocations);
  return ptr;
}

void cuda_backend::free_tier(memory_kind kind, void* ptr, std::size_t bytes, int device) noexcept {
  std::optional<tier_record> record;
  {
    const std::lock_guard lock(live_mutex_);
    if (const auto it = tiers_.find(ptr);
        it != tiers_.end() && it->second.kind == kind && it->second.bytes == bytes &&
        (kind == memory_kind::pinned_host || it->second.device == device)) {
      record = it->second;
      tiers_.erase(it);
      counters_.live_allocations.fetch_sub(1, std::memory_order_relaxed);
      counters_.live_bytes.fetch_sub(bytes, std::memory_order_relaxed);
    }
  }
  if (!record) {
    // Never hand a foreign pointer to the runtime: it might be someone else's.
    log(log_level::warning, "free_tier(" + std::string(to_string(kind)) + ", " + hex(ptr) + ", " +
                                std::to_string(bytes) +
                                " bytes): not a live tier allocation of "
                                "this backend as that kind and size; left alone");
    bump(counters_.bad_frees);
    return;
  }
  const cudaError_t status = kind == memory_kind::pinned_host ? cudaFreeHost(ptr) : cudaFree(ptr);
  if (status == cudaSuccess || status == cudaErrorCudartUnloading) {
    bump(counters_.tier_frees);
    return;
  }
  log(log_level::error,
      std::string(kind == memory_kind::pinned_host ? "cudaFreeHost(" : "cudaFree(") + hex(ptr) +
          ") of " + std::to_string(bytes) + " bytes failed: " + describe_cuda_status(status) +
          (is_sticky_cuda_error(status) ? "; the CUDA context is poisoned" : ""));
  if (!is_sticky_cuda_error(status))
    static_cast<void>(cudaGetLastError());
  bump(counters_.bad_frees);
}

void cuda_backend::copy(void* dst, const void* src, std::size_t bytes, stream_view stream) {
  UMA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, to_cuda(stream)),
                 "copying " + describe_bytes(bytes) + " from " + hex(src) + " to " + hex(dst));
  bump(counters_.copies);
  bump(counters_.copy_bytes, bytes);
}

}  // namespace uma::detail
