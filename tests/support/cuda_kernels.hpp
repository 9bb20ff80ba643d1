#pragma once

// GPU helpers for uma's tests, compiled by nvcc in tests/support/cuda_kernels.cu. The header is
// free of CUDA headers: streams are plain `void*` (a `cudaStream_t`; null is the legacy default
// stream). Every helper aborts with a message naming the failing call: these are test fixtures,
// not library code.

#include <cstddef>
#include <cstdint>

namespace uma::test {

/// Enqueues a kernel setting `data[0, n)` to `value` on `stream`.
void fill_on_device(float* data, std::size_t n, float value, void* stream);
/// Enqueues a kernel that spins for `cycles` GPU clock cycles, then sets `data[0, n)` to
/// `value` on `stream`: work that keeps a block in use on a stream for a while.
void spin_then_fill_on_device(float* data, std::size_t n, float value, long long cycles,
                              void* stream);
/// Enqueues a kernel adding `delta` to every element of `data[0, n)` on `stream`.
void add_on_device(float* data, std::size_t n, float delta, void* stream);
/// Sums `data[0, n)` on the device (legacy default stream) and waits for the result.
[[nodiscard]] double sum_on_device(const float* data, std::size_t n);

/// GB/s of one kernel reading `data[0, n)` (n a multiple of 4) on a non-blocking stream of its
/// own, waited for: thousands of GB/s when the data is resident on the device, the link's tens when
/// it is read remotely or migrated on fault. The read itself may migrate pages.
[[nodiscard]] double read_gbps(const float* data, std::size_t n);
/// Bytes of the current device's memory in use (cudaMemGetInfo: total - free), by anyone.
[[nodiscard]] std::size_t device_used_bytes();

/// A new non-blocking stream on the current device.
[[nodiscard]] void* create_stream();
/// Destroys a stream from create_stream (null is ignored).
void destroy_stream(void* stream);
/// Waits for all work on `stream`.
void stream_synchronize(void* stream);
/// Waits for all work on the current device.
void device_synchronize();

/// cudaMalloc / cudaFree.
[[nodiscard]] void* alloc_device(std::size_t bytes);
void free_device(void* ptr);
/// cudaMallocHost / cudaFreeHost.
[[nodiscard]] void* alloc_pinned(std::size_t bytes);
void free_pinned(void* ptr);
/// cudaMallocAsync from the current device's default pool, ordered on `stream` and waited for.
[[nodiscard]] void* alloc_pool(std::size_t bytes, void* stream);
/// cudaFreeAsync on `stream`, waited for.
void free_pool(void* ptr, void* stream);

/// The value a pattern seeded with `seed` has at index `i` (what check_pattern_on_device checks).
[[nodiscard]] std::uint32_t pattern_at(std::size_t i, std::uint32_t seed);
/// Enqueues a kernel adding to `*mismatches` (device memory) the elements of `data[0, n)` that
/// differ from the pattern seeded with `seed`.
void check_pattern_on_device(const std::uint32_t* data, std::size_t n, std::uint32_t seed,
                             unsigned long long* mismatches, void* stream);
/// An event recorded on `stream` now; `wait_event` makes another stream wait for it.
[[nodiscard]] void* record_event(void* stream);
void wait_event(void* stream, void* event);
void destroy_event(void* event);

/// Starts capturing `stream` into a graph (thread-local capture mode).
void begin_capture(void* stream);
/// Ends the capture on `stream` and destroys the captured graph.
void end_capture_and_destroy(void* stream);

}  // namespace uma::test
