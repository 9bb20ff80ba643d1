#pragma once

// The worker pipeline's GPU step, compiled by nvcc in examples/worker_pipeline_kernel.cu when
// uma is built with CUDA (the build then defines UMA_PIPELINE_CUDA). Free of CUDA headers so that
// the pipeline's actors compile with the host compiler alone: streams are plain `void*`
// (a `cudaStream_t`).

#include <cstddef>

namespace uma::pipeline {

/// Creates a non-blocking stream on the current device. Throws `std::runtime_error` naming the
/// CUDA error when the runtime refuses.
[[nodiscard]] void* create_stream();

/// Destroys a stream from `create_stream` (null is ignored). Never throws: a failure is printed.
void destroy_stream(void* stream) noexcept;

/// Enqueues `data[i] = data[i] * scale + offset` for every i < n on `stream` of the current
/// device. `data` must be device-accessible (managed memory). Returns once the kernel is queued;
/// throws `std::runtime_error` naming the CUDA error when the launch fails.
void scale_add_on_device(float* data, std::size_t n, float scale, float offset, void* stream);

}  // namespace uma::pipeline
