// The simplest cache over cudaMallocManaged, as a PyTorch pluggable allocator: power-of-two bins
// per device, one mutex, no stream safety, no accounting, nothing ever given back. A benchmark
// baseline only (bench/python/torch_step.py): it shows what managed memory costs once nobody
// calls cudaMallocManaged/cudaFree on the hot path. Reusing a block on another stream without
// an event is exactly the hazard uma's caching layer avoids.
#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>
#include <vector>

namespace {

constexpr int max_devices = 16;
constexpr int bins = 48;    // up to 2^47 bytes
constexpr int min_bin = 9;  // 512 bytes

std::mutex mutex;
std::vector<void*> free_blocks[max_devices][bins];

int bin_of(std::size_t size) {
  int bin = min_bin;
  while (bin < bins && (std::size_t{1} << bin) < size) {
    ++bin;
  }
  return bin;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* naive_cache_malloc(std::ptrdiff_t size, int device,
                                                                cudaStream_t stream) {
  (void)stream;
  const int bin = size > 0 ? bin_of(static_cast<std::size_t>(size)) : bins;
  if (bin >= bins || device < 0 || device >= max_devices) {
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto& list = free_blocks[device][bin];
    if (!list.empty()) {
      void* ptr = list.back();
      list.pop_back();
      return ptr;
    }
  }
  void* ptr = nullptr;
  if (cudaMallocManaged(&ptr, std::size_t{1} << bin) != cudaSuccess) {
    return nullptr;
  }
  return ptr;
}

__attribute__((visibility("default"))) void naive_cache_free(void* ptr, std::ptrdiff_t size,
                                                             int device, cudaStream_t stream) {
  (void)stream;
  if (ptr == nullptr || size <= 0 || device < 0 || device >= max_devices) {
    return;
  }
  std::lock_guard<std::mutex> lock(mutex);
  free_blocks[device][bin_of(static_cast<std::size_t>(size))].push_back(ptr);
}

}  // extern "C"
