#include "examples/worker_pipeline_kernel.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace uma::pipeline {

namespace {

constexpr unsigned int block_size = 256;
constexpr unsigned int max_blocks = 4096;

[[noreturn]] void fail(const char* call, cudaError_t status) {
  throw std::runtime_error(std::string(call) + " failed: " + cudaGetErrorName(status) + " (" +
                           cudaGetErrorString(status) + ")");
}

unsigned int grid_for(std::size_t n) {
  const std::size_t blocks = (n + block_size - 1) / block_size;
  if (blocks == 0) {
    return 1;
  }
  return static_cast<unsigned int>(blocks < max_blocks ? blocks : max_blocks);
}

__global__ void scale_add_kernel(float* data, std::size_t n, float scale, float offset) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(blockDim.x) * gridDim.x) {
    data[i] = data[i] * scale + offset;
  }
}

}  // namespace

void* create_stream() {
  cudaStream_t stream = nullptr;
  if (const cudaError_t status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      status != cudaSuccess) {
    fail("cudaStreamCreateWithFlags", status);
  }
  return stream;
}

void destroy_stream(void* stream) noexcept {
  if (stream == nullptr) {
    return;
  }
  const cudaError_t status = cudaStreamDestroy(static_cast<cudaStream_t>(stream));
  // At process exit the runtime may already be unloading: nothing is left to destroy then.
  if (status != cudaSuccess && status != cudaErrorCudartUnloading) {
    std::fprintf(stderr, "worker_pipeline: cudaStreamDestroy failed: %s (%s)\n",
                 cudaGetErrorName(status), cudaGetErrorString(status));
  }
}

void scale_add_on_device(float* data, std::size_t n, float scale, float offset, void* stream) {
  scale_add_kernel<<<grid_for(n), block_size, 0, static_cast<cudaStream_t>(stream)>>>(
      data, n, scale, offset);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) {
    fail("scale_add_kernel launch", status);
  }
}

}  // namespace uma::pipeline
