// The baseline a user gets today for managed memory in PyTorch: a pluggable allocator that calls
// cudaMallocManaged and cudaFree for every block (bench/python/torch_step.py loads it with
// torch.cuda.memory.CUDAPluggableAllocator). Not part of uma; a benchmark baseline only.
#include <cuda_runtime.h>

#include <cstddef>

extern "C" {

__attribute__((visibility("default"))) void* naive_managed_malloc(std::ptrdiff_t size, int device,
                                                                  cudaStream_t stream) {
  (void)device;  // PyTorch made `device` current before calling
  (void)stream;
  void* ptr = nullptr;
  if (size <= 0 || cudaMallocManaged(&ptr, static_cast<std::size_t>(size)) != cudaSuccess) {
    return nullptr;
  }
  return ptr;
}

__attribute__((visibility("default"))) void naive_managed_free(void* ptr, std::ptrdiff_t size,
                                                               int device, cudaStream_t stream) {
  (void)size;
  (void)device;
  (void)stream;
  if (ptr != nullptr) {
    cudaFree(ptr);  // synchronizes the device: the cost this baseline shows
  }
}

}  // extern "C"
