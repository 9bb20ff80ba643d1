#pragma once

// The raw-CUDA side of uma_bench: the baselines uma is compared with (cudaMallocManaged,
// a managed memory pool, cudaMemPrefetchAsync and its batch form, cudaMemAdvise, pinned
// cudaMemcpy, cudaMalloc) and the kernels (fill, read). Compiled by nvcc in bench/cuda_ops.cu
// when uma is built with CUDA; bench/cuda_ops_none.cpp otherwise, where `compiled()` is false
// and every other function throws. Free of CUDA headers (and C++17, for nvcc): streams are
// plain `void*` (a `cudaStream_t`), locations a device ordinal or `host_location`.
// Every function works on the current device (device 0) and throws `std::runtime_error` naming
// the CUDA call and error when the runtime refuses.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace uma::bench::cuda {

/// A prefetch target meaning "host memory" (any other value is a device ordinal).
constexpr int host_location = -1;

/// True when this binary carries the CUDA baselines.
[[nodiscard]] bool compiled() noexcept;

/// Free and total memory of the current device (cudaMemGetInfo).
struct memory_info {
  std::size_t free = 0;
  std::size_t total = 0;
};
[[nodiscard]] memory_info mem_info();

/// A new non-blocking stream; `destroy_stream` ignores null and never throws.
[[nodiscard]] void* create_stream();
void destroy_stream(void* stream) noexcept;
/// Waits for `stream`.
void synchronize(void* stream);

/// cudaMallocManaged (attach global) / cudaFree.
[[nodiscard]] void* malloc_managed(std::size_t bytes);
void free_managed(void* ptr);
/// cudaMalloc / cudaFree.
[[nodiscard]] void* malloc_device(std::size_t bytes);
void free_device(void* ptr);
/// cudaMallocHost / cudaFreeHost.
[[nodiscard]] void* malloc_pinned(std::size_t bytes);
void free_pinned(void* ptr);

/// Enqueues a kernel writing a non-zero pattern over `bytes` (a multiple of 4) at `ptr`.
void fill(void* ptr, std::size_t bytes, std::uint32_t seed, void* stream);
/// cudaMemPrefetchAsync of one range to `target` (a device ordinal or host_location).
void prefetch(const void* ptr, std::size_t bytes, int target, void* stream);
/// `prefetch` issued from the calling thread or from a new thread, its completion awaited by
/// cudaStreamSynchronize or through a host callback (cudaLaunchHostFunc) the caller waits for.
/// A new thread plus a host callback was uma's mechanism before worker lanes (a worker thread
/// issues the call, a stream callback reports completion) without uma. Returns once the prefetch
/// has completed.
void prefetch_and_wait(const void* ptr, std::size_t bytes, int target, void* stream,
                       bool from_new_thread, bool host_callback);
/// cudaMemPrefetchBatchAsync of `ptrs[i], sizes[i]` to one `target` (needs a non-null stream).
void prefetch_batch(const std::vector<void*>& ptrs, const std::vector<std::size_t>& sizes,
                    int target, void* stream);
/// cudaMemAdvise(SetAccessedBy, device `device`).
void advise_accessed_by(const void* ptr, std::size_t bytes, int device);
/// cudaMemcpyAsync(cudaMemcpyDefault).
void copy(void* dst, const void* src, std::size_t bytes, void* stream);

/// Enqueues the read kernel (below) over `bytes` (a multiple of 16) at `ptr` on `stream`.
void read_async(const void* ptr, std::size_t bytes, void* stream);
/// Enqueues a kernel adding 1 to every 32-bit word of `bytes` (a multiple of 16) at `ptr` on
/// `stream`: every byte read and written once.
void add_one_async(void* ptr, std::size_t bytes, void* stream);

/// Milliseconds one launch of the read kernel over `bytes` at `ptr` takes on `stream` (CUDA
/// events): every 16-byte word is loaded once; nothing is written unless a checksum matches a
/// value it practically never has, so the loads cannot be optimised away.
[[nodiscard]] double read_kernel_ms(const void* ptr, std::size_t bytes, void* stream);

/// Per-pair wall times (ns) of `cudaMallocManaged(bytes)` + `cudaFree`, `warmup` pairs
/// excluded, at most `iterations` pairs or until `time_limit_s` has passed (at least 10 pairs).
/// `keep_one_alive`: another managed block of `bytes` stays allocated during the loop (warm);
/// otherwise nothing else is allocated (cold).
[[nodiscard]] std::vector<double> malloc_managed_pairs(std::size_t bytes, int warmup,
                                                       int iterations, double time_limit_s,
                                                       bool keep_one_alive);

/// A managed-memory pool (CUDA 13: cudaMemPoolCreate with cudaMemAllocationTypeManaged), or
/// the reason none could be had.
struct managed_pool {
  void* handle = nullptr;  ///< cudaMemPool_t; null when `error` says why
  bool owned = false;      ///< created here (destroyed by destroy_managed_pool)
  std::string how;         ///< which way it was obtained
  std::string error;       ///< every refusal, when no pool could be had
};
/// Tries cudaMemPoolCreate(managed, device 0), then (managed, no location), then
/// cudaMemGetDefaultMemPool(managed). Never throws.
[[nodiscard]] managed_pool create_managed_pool() noexcept;
void destroy_managed_pool(managed_pool& pool) noexcept;
/// Per-pair wall times (ns) of cudaMallocFromPoolAsync + cudaFreeAsync on `stream`, with no
/// synchronization per pair (the stream is synchronized once, after the loop).
[[nodiscard]] std::vector<double> mempool_pairs(const managed_pool& pool, std::size_t bytes,
                                                int warmup, int iterations, double time_limit_s,
                                                void* stream);

/// Pairs completed by `threads` threads for about `seconds`, and the seconds it took.
struct throughput {
  std::uint64_t pairs = 0;
  double seconds = 0;
};
/// Each thread: cudaMallocManaged(bytes) + cudaFree in a loop.
[[nodiscard]] throughput malloc_managed_throughput(std::size_t bytes, int threads, double seconds);
/// Each thread on its own stream: cudaMallocFromPoolAsync + cudaFreeAsync in a loop.
[[nodiscard]] throughput mempool_throughput(const managed_pool& pool, std::size_t bytes,
                                            int threads, double seconds);

}  // namespace uma::bench::cuda
