#include "bench/cuda_ops.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace uma::bench::cuda {

namespace {

using clock_type = std::chrono::steady_clock;

std::string describe(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")";
}

void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    throw std::runtime_error(std::string(call) + " failed: " + describe(status));
  }
}

#define UMA_BENCH_CUDA(call) check((call), #call)

cudaStream_t as_stream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

cudaMemLocation to_location(int target) {
  cudaMemLocation loc{};
  if (target == host_location) {
    loc.type = cudaMemLocationTypeHost;
    loc.id = 0;
  } else {
    loc.type = cudaMemLocationTypeDevice;
    loc.id = target;
  }
  return loc;
}

double ns_since(clock_type::time_point start) {
  return std::chrono::duration<double, std::nano>(clock_type::now() - start).count();
}

constexpr unsigned int block_size = 256;

__global__ void fill_kernel(std::uint32_t* data, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(blockDim.x) * gridDim.x) {
    data[i] = (seed ^ static_cast<std::uint32_t>(i * 2654435761u)) | 1u;
  }
}

__global__ void read_kernel(const uint4* data, std::size_t n, std::uint32_t* sink) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  std::uint32_t acc = 0;
  // Four independent loads in flight per thread, then the remainder.
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = data[i];
    const uint4 b = data[i + stride];
    const uint4 c = data[i + 2 * stride];
    const uint4 d = data[i + 3 * stride];
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^
           d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = data[i];
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9e3779b9u) {
    *sink = acc;
  }
}

__global__ void add_one_kernel(uint4* data, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(blockDim.x) * gridDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    uint4 v = data[i];
    v.x += 1u;
    v.y += 1u;
    v.z += 1u;
    v.w += 1u;
    data[i] = v;
  }
}

unsigned int fill_grid(std::size_t n) {
  const std::size_t blocks = (n + block_size - 1) / block_size;
  return static_cast<unsigned int>(std::clamp<std::size_t>(blocks, 1, 65535));
}

/// Enough blocks to fill every SM at full occupancy (computed once).
unsigned int read_grid() {
  static const unsigned int grid = [] {
    int device = 0;
    UMA_BENCH_CUDA(cudaGetDevice(&device));
    int sms = 0;
    UMA_BENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    int per_sm = 0;
    UMA_BENCH_CUDA(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_kernel, block_size, 0));
    return static_cast<unsigned int>(std::max(1, sms * std::max(1, per_sm)));
  }();
  return grid;
}

/// Runs `pair()` `warmup` times, then times it up to `iterations` times or until the time
/// limit (at least 10 timed pairs).
template <class Pair>
std::vector<double> time_pairs(int warmup, int iterations, double time_limit_s, Pair pair) {
  for (int i = 0; i < warmup; ++i) {
    pair();
  }
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(iterations));
  const auto start = clock_type::now();
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = clock_type::now();
    pair();
    samples.push_back(ns_since(t0));
    if (i >= 10 && ns_since(start) > time_limit_s * 1e9) {
      break;
    }
  }
  return samples;
}

/// `threads` threads run `pair()` until `seconds` have passed.
template <class Setup, class Pair, class Teardown>
throughput run_threads(int threads, double seconds, Setup setup, Pair pair, Teardown teardown) {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> pairs{0};
  std::vector<std::string> errors(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  const auto start = clock_type::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        auto local = setup();
        std::uint64_t n = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          pair(local);
          ++n;
        }
        teardown(local);
        pairs.fetch_add(n);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(t)] = e.what();
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : pool) {
    th.join();
  }
  const double elapsed = ns_since(start) / 1e9;
  for (const auto& e : errors) {
    if (!e.empty()) {
      throw std::runtime_error(e);
    }
  }
  return {pairs.load(), elapsed};
}

}  // namespace

bool compiled() noexcept {
  return true;
}

memory_info mem_info() {
  memory_info out;
  UMA_BENCH_CUDA(cudaMemGetInfo(&out.free, &out.total));
  return out;
}

void* create_stream() {
  cudaStream_t stream = nullptr;
  UMA_BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

void destroy_stream(void* stream) noexcept {
  if (stream != nullptr) {
    static_cast<void>(cudaStreamDestroy(as_stream(stream)));
  }
}

void synchronize(void* stream) {
  UMA_BENCH_CUDA(cudaStreamSynchronize(as_stream(stream)));
}

void* malloc_managed(std::size_t bytes) {
  void* ptr = nullptr;
  UMA_BENCH_CUDA(cudaMallocManaged(&ptr, bytes, cudaMemAttachGlobal));
  return ptr;
}

void free_managed(void* ptr) {
  UMA_BENCH_CUDA(cudaFree(ptr));
}

void* malloc_device(std::size_t bytes) {
  void* ptr = nullptr;
  UMA_BENCH_CUDA(cudaMalloc(&ptr, bytes));
  return ptr;
}

void free_device(void* ptr) {
  UMA_BENCH_CUDA(cudaFree(ptr));
}

void* malloc_pinned(std::size_t bytes) {
  void* ptr = nullptr;
  UMA_BENCH_CUDA(cudaMallocHost(&ptr, bytes));
  return ptr;
}

void free_pinned(void* ptr) {
  UMA_BENCH_CUDA(cudaFreeHost(ptr));
}

void fill(void* ptr, std::size_t bytes, std::uint32_t seed, void* stream) {
  const std::size_t n = bytes / sizeof(std::uint32_t);
  fill_kernel<<<fill_grid(n), block_size, 0, as_stream(stream)>>>(static_cast<std::uint32_t*>(ptr),
                                                                  n, seed);
  UMA_BENCH_CUDA(cudaGetLastError());
}

void prefetch(const void* ptr, std::size_t bytes, int target, void* stream) {
  UMA_BENCH_CUDA(cudaMemPrefetchAsync(ptr, bytes, to_location(target), 0, as_stream(stream)));
}

namespace {

struct done_flag {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
};

void CUDART_CB on_prefetch_done(void* arg) {
  auto* d = static_cast<done_flag*>(arg);
  const std::lock_guard<std::mutex> lock(d->mutex);  // notify under the lock: d may go at once
  d->done = true;
  d->cv.notify_one();
}

}  // namespace

void prefetch_and_wait(const void* ptr, std::size_t bytes, int target, void* stream,
                       bool from_new_thread, bool host_callback) {
  done_flag d;
  std::string error;
  const auto issue = [&] {
    try {
      prefetch(ptr, bytes, target, stream);
      if (host_callback) {
        UMA_BENCH_CUDA(cudaLaunchHostFunc(as_stream(stream), &on_prefetch_done, &d));
      } else {
        synchronize(stream);
        on_prefetch_done(&d);
      }
    } catch (const std::exception& e) {
      error = e.what();
      on_prefetch_done(&d);
    }
  };
  std::thread issuer;
  if (from_new_thread) {
    issuer = std::thread(issue);
  } else {
    issue();
  }
  {
    std::unique_lock<std::mutex> lock(d.mutex);
    d.cv.wait(lock, [&] { return d.done; });
  }
  if (issuer.joinable()) {
    issuer.join();
  }
  if (!error.empty()) {
    throw std::runtime_error(error);
  }
}

void prefetch_batch(const std::vector<void*>& ptrs, const std::vector<std::size_t>& sizes,
                    int target, void* stream) {
  std::vector<void*> p(ptrs);
  std::vector<std::size_t> s(sizes);
  cudaMemLocation loc = to_location(target);
  std::size_t first = 0;
  UMA_BENCH_CUDA(cudaMemPrefetchBatchAsync(p.data(), s.data(), p.size(), &loc, &first, 1, 0,
                                           as_stream(stream)));
}

void advise_accessed_by(const void* ptr, std::size_t bytes, int device) {
  UMA_BENCH_CUDA(cudaMemAdvise(ptr, bytes, cudaMemAdviseSetAccessedBy, to_location(device)));
}

void copy(void* dst, const void* src, std::size_t bytes, void* stream) {
  UMA_BENCH_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(stream)));
}

void read_async(const void* ptr, std::size_t bytes, void* stream) {
  static std::uint32_t* sink = [] {
    void* p = nullptr;
    UMA_BENCH_CUDA(cudaMalloc(&p, sizeof(std::uint32_t)));
    return static_cast<std::uint32_t*>(p);
  }();
  read_kernel<<<read_grid(), block_size, 0, as_stream(stream)>>>(static_cast<const uint4*>(ptr),
                                                                 bytes / sizeof(uint4), sink);
  UMA_BENCH_CUDA(cudaGetLastError());
}

void add_one_async(void* ptr, std::size_t bytes, void* stream) {
  add_one_kernel<<<read_grid(), block_size, 0, as_stream(stream)>>>(static_cast<uint4*>(ptr),
                                                                    bytes / sizeof(uint4));
  UMA_BENCH_CUDA(cudaGetLastError());
}

double read_kernel_ms(const void* ptr, std::size_t bytes, void* stream) {
  static std::uint32_t* sink = [] {
    void* p = nullptr;
    UMA_BENCH_CUDA(cudaMalloc(&p, sizeof(std::uint32_t)));
    return static_cast<std::uint32_t*>(p);
  }();
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  UMA_BENCH_CUDA(cudaEventCreate(&start));
  UMA_BENCH_CUDA(cudaEventCreate(&stop));
  float ms = 0;
  try {
    UMA_BENCH_CUDA(cudaEventRecord(start, as_stream(stream)));
    read_kernel<<<read_grid(), block_size, 0, as_stream(stream)>>>(static_cast<const uint4*>(ptr),
                                                                   bytes / sizeof(uint4), sink);
    UMA_BENCH_CUDA(cudaGetLastError());
    UMA_BENCH_CUDA(cudaEventRecord(stop, as_stream(stream)));
    UMA_BENCH_CUDA(cudaEventSynchronize(stop));
    UMA_BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
  } catch (...) {
    static_cast<void>(cudaEventDestroy(start));
    static_cast<void>(cudaEventDestroy(stop));
    throw;
  }
  static_cast<void>(cudaEventDestroy(start));
  static_cast<void>(cudaEventDestroy(stop));
  return ms;
}

std::vector<double> malloc_managed_pairs(std::size_t bytes, int warmup, int iterations,
                                         double time_limit_s, bool keep_one_alive) {
  void* kept = keep_one_alive ? malloc_managed(bytes) : nullptr;
  try {
    auto samples = time_pairs(warmup, iterations, time_limit_s, [bytes] {
      void* p = nullptr;
      UMA_BENCH_CUDA(cudaMallocManaged(&p, bytes, cudaMemAttachGlobal));
      UMA_BENCH_CUDA(cudaFree(p));
    });
    if (kept != nullptr) {
      free_managed(kept);
    }
    return samples;
  } catch (...) {
    if (kept != nullptr) {
      static_cast<void>(cudaFree(kept));
    }
    throw;
  }
}

managed_pool create_managed_pool() noexcept {
  managed_pool out;
  try {
    const auto note = [&](const std::string& what, cudaError_t status) {
      static_cast<void>(cudaGetLastError());
      out.error += (out.error.empty() ? "" : "; ") + what + ": " + describe(status);
    };
    const auto usable = [&](cudaMemPool_t pool, const std::string& what) {
      // A pool that hands out nothing is no pool: allocate once before timing anything.
      cudaStream_t stream = nullptr;
      void* p = nullptr;
      cudaError_t status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      if (status == cudaSuccess) {
        status = cudaMallocFromPoolAsync(&p, 4096, pool, stream);
      }
      if (status == cudaSuccess) {
        status = cudaFreeAsync(p, stream);
      }
      if (status == cudaSuccess) {
        status = cudaStreamSynchronize(stream);
      }
      if (stream != nullptr) {
        static_cast<void>(cudaStreamDestroy(stream));
      }
      if (status != cudaSuccess) {
        note(what + " then cudaMallocFromPoolAsync", status);
        return false;
      }
      std::uint64_t keep = UINT64_MAX;  // cache freed memory across synchronizations
      static_cast<void>(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
      static_cast<void>(cudaGetLastError());
      return true;
    };
    for (const bool on_device : {true, false}) {
      cudaMemPoolProps props{};
      props.allocType = cudaMemAllocationTypeManaged;
      props.handleTypes = cudaMemHandleTypeNone;
      props.location.type = on_device ? cudaMemLocationTypeDevice : cudaMemLocationTypeNone;
      props.location.id = 0;
      const std::string what = std::string("cudaMemPoolCreate(allocType managed, location ") +
                               (on_device ? "device 0" : "none") + ")";
      cudaMemPool_t pool = nullptr;
      const cudaError_t status = cudaMemPoolCreate(&pool, &props);
      if (status != cudaSuccess) {
        note(what, status);
        continue;
      }
      if (usable(pool, what)) {
        out.handle = pool;
        out.owned = true;
        out.how = what;
        return out;
      }
      static_cast<void>(cudaMemPoolDestroy(pool));
    }
    cudaMemLocation loc{};
    loc.type = cudaMemLocationTypeNone;
    cudaMemPool_t pool = nullptr;
    const std::string what = "cudaMemGetDefaultMemPool(location none, managed)";
    const cudaError_t status = cudaMemGetDefaultMemPool(&pool, &loc, cudaMemAllocationTypeManaged);
    if (status != cudaSuccess) {
      note(what, status);
    } else if (usable(pool, what)) {
      out.handle = pool;
      out.how = what;
    }
  } catch (...) {
    out.handle = nullptr;
    out.error = "out of memory while creating a managed pool";
  }
  return out;
}

void destroy_managed_pool(managed_pool& pool) noexcept {
  if (pool.handle != nullptr && pool.owned) {
    static_cast<void>(cudaMemPoolDestroy(static_cast<cudaMemPool_t>(pool.handle)));
  }
  pool.handle = nullptr;
}

std::vector<double> mempool_pairs(const managed_pool& pool, std::size_t bytes, int warmup,
                                  int iterations, double time_limit_s, void* stream) {
  const auto handle = static_cast<cudaMemPool_t>(pool.handle);
  auto samples = time_pairs(warmup, iterations, time_limit_s, [&] {
    void* p = nullptr;
    UMA_BENCH_CUDA(cudaMallocFromPoolAsync(&p, bytes, handle, as_stream(stream)));
    UMA_BENCH_CUDA(cudaFreeAsync(p, as_stream(stream)));
  });
  synchronize(stream);
  return samples;
}

throughput malloc_managed_throughput(std::size_t bytes, int threads, double seconds) {
  return run_threads(
      threads, seconds, [] { return 0; },
      [bytes](int&) {
        void* p = nullptr;
        UMA_BENCH_CUDA(cudaMallocManaged(&p, bytes, cudaMemAttachGlobal));
        UMA_BENCH_CUDA(cudaFree(p));
      },
      [](int&) {});
}

throughput mempool_throughput(const managed_pool& pool, std::size_t bytes, int threads,
                              double seconds) {
  const auto handle = static_cast<cudaMemPool_t>(pool.handle);
  return run_threads(
      threads, seconds, [] { return create_stream(); },
      [bytes, handle](void*& stream) {
        void* p = nullptr;
        UMA_BENCH_CUDA(cudaMallocFromPoolAsync(&p, bytes, handle, as_stream(stream)));
        UMA_BENCH_CUDA(cudaFreeAsync(p, as_stream(stream)));
      },
      [](void*& stream) {
        synchronize(stream);
        destroy_stream(stream);
      });
}

}  // namespace uma::bench::cuda
