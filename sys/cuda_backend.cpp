#include <uma/sys/cuda_backend.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <utility>

#include <uma/sys/cuda_backend_impl.hpp>
#include <uma/sys/cuda_check.hpp>
#include <uma/sys/log.hpp>

namespace uma {

namespace detail {

std::string describe_stream(stream_view stream) {
  return stream.handle == nullptr ? std::string("the default stream")
                                  : "stream " + hex(stream.handle);
}

std::string describe_range(const byte_range& range) {
  return "range " + hex(range.ptr) + " of " + describe_bytes(range.bytes);
}

cuda_backend::cuda_backend(int device_count) {
  UMA_CUDA_CHECK(cudaRuntimeGetVersion(&runtime_version_), "querying the runtime version");
  UMA_CUDA_CHECK(cudaDriverGetVersion(&driver_version_), "querying the driver version");
  devices_.reserve(static_cast<std::size_t>(device_count));
  bool all_concurrent = true;
  for (int ordinal = 0; ordinal < device_count; ++ordinal) {
    devices_.push_back(query_device(ordinal));
    all_concurrent = all_concurrent && devices_.back().concurrent_managed_access;
  }
  // The batch entry points refuse to work unless every device has concurrent managed access.
  const bool batch = runtime_version_ >= batch_api_version &&
                     driver_version_ >= batch_api_version && all_concurrent;
  for (auto& device : devices_) {
    device.batch_api = batch;
  }
  batch_available_.store(batch, std::memory_order_relaxed);
  host_numa_nodes_ = count_host_numa_nodes();
  pointer_get_attribute_ = resolve_pointer_get_attribute();
}

std::string cuda_backend::description() const {
  std::string text = "cuda: " + std::to_string(devices_.size()) + " device(s): ";
  for (const auto& device : devices_) {
    if (device.ordinal > 0) {
      text += ", ";
    }
    char memory[32];
    std::snprintf(memory, sizeof(memory), "%.1f GiB",
                  static_cast<double>(device.total_memory) / (1024.0 * 1024.0 * 1024.0));
    // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict on the chained form.
    text += '[';
    text += std::to_string(device.ordinal);
    text += "] ";
    text += device.name;
    text += " (sm_";
    text += std::to_string(device.compute_major);
    text += std::to_string(device.compute_minor);
    text += ", ";
    text += memory;
    text += ')';
  }
  text +=
      "; driver " + version_text(driver_version_) + ", runtime " + version_text(runtime_version_);
  if (!batch_available_.load(std::memory_order_relaxed)) {
    text += "; no batch prefetch";
  }
  return text;
}

const device_capabilities& cuda_backend::capabilities(int ordinal) const {
  if (ordinal < 0 || ordinal >= device_count()) {
    raise(errc::invalid_argument, "capabilities: no CUDA device " + std::to_string(ordinal) + " (" +
                                      std::to_string(device_count()) + " device(s))");
  }
  return devices_[static_cast<std::size_t>(ordinal)];
}

std::size_t cuda_backend::default_quota() const {
  std::call_once(quota_once_, [this] {
    device_guard guard;
    std::size_t smallest = std::numeric_limits<std::size_t>::max();
    for (const auto& device : devices_) {
      guard.set(device.ordinal);
      std::size_t free = 0;
      std::size_t total = 0;
      UMA_CUDA_CHECK(cudaMemGetInfo(&free, &total), "device " + std::to_string(device.ordinal));
      smallest = std::min(smallest, free);
    }
    quota_ = smallest / 4 * 3;
  });
  return quota_;
}

void* cuda_backend::allocate_managed(std::size_t bytes, attach_flag attach) {
  // cudaMallocManaged(0) succeeds with a null pointer; uma's backends hand out no empty regions.
  if (bytes == 0)
    raise(errc::invalid_argument, "cuda allocate_managed: zero bytes requested");
  void* ptr = nullptr;
  const unsigned int flags = attach == attach_flag::host ? cudaMemAttachHost : cudaMemAttachGlobal;
  UMA_CUDA_CHECK(cudaMallocManaged(&ptr, bytes, flags),
                 "allocating " + describe_bytes(bytes) + " of managed memory (attach " +
                     (attach == attach_flag::host ? "host" : "global") + ")");
  try {
    const std::lock_guard lock(live_mutex_);
    live_.emplace(ptr, bytes);
    bump(counters_.live_allocations);
    bump(counters_.live_bytes, bytes);
  } catch (...) {
    static_cast<void>(cudaFree(ptr));
    throw;
  }
  bump(counters_.allocations);
  return ptr;
}

void cuda_backend::free_managed(void* ptr, std::size_t bytes) noexcept {
  if (ptr == nullptr) {
    return;
  }
  std::size_t recorded = 0;
  bool known = false;
  {
    const std::lock_guard lock(live_mutex_);
    if (const auto it = live_.find(ptr); it != live_.end()) {
      recorded = it->second;
      live_.erase(it);
      known = true;
      counters_.live_allocations.fetch_sub(1, std::memory_order_relaxed);
      counters_.live_bytes.fetch_sub(recorded, std::memory_order_relaxed);
    }
  }
  if (!known) {
    // Never hand a foreign pointer to cudaFree: it might belong to someone else's allocation.
    log(log_level::warning, "free_managed(" + detail::hex(ptr) + ", " + std::to_string(bytes) +
                                " bytes): not a live allocation of this backend (foreign "
                                "pointer or double free); left alone");
    bump(counters_.bad_frees);
    return;
  }
  if (recorded != bytes) {
    log(log_level::warning, "free_managed(" + detail::hex(ptr) + "): freed as " +
                                std::to_string(bytes) + " bytes but allocated as " +
                                std::to_string(recorded) + " bytes");
  }
  const cudaError_t status = cudaFree(ptr);
  if (status == cudaSuccess || status == cudaErrorCudartUnloading) {
    // At process exit the runtime may already be gone; the memory goes with the process.
    bump(counters_.frees);
    return;
  }
  log(log_level::error,
      "cudaFree(" + detail::hex(ptr) + ") of " + std::to_string(recorded) +
          " bytes failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")" +
          (detail::is_sticky_cuda_error(status) ? "; the CUDA context is poisoned" : ""));
  if (!detail::is_sticky_cuda_error(status)) {
    static_cast<void>(cudaGetLastError());
  }
  bump(counters_.bad_frees);
}

memory_kind cuda_backend::kind_of(const void* ptr) {
  if (ptr == nullptr) {
    return memory_kind::unknown;
  }
  cudaPointerAttributes attributes{};
  const cudaError_t status = cudaPointerGetAttributes(&attributes, ptr);
  if (status == cudaErrorInvalidValue) {
    // Runtimes before 11.0 answered "not a CUDA pointer" this way.
    static_cast<void>(cudaGetLastError());
    return memory_kind::host;
  }
  if (status != cudaSuccess) {
    detail::throw_cuda_error(status, "cudaPointerGetAttributes", "pointer " + hex(ptr), __FILE__,
                             __LINE__);
  }
  switch (attributes.type) {
    case cudaMemoryTypeUnregistered:
      static_cast<void>(cudaGetLastError());
      return memory_kind::host;
    case cudaMemoryTypeHost:
      return memory_kind::pinned_host;
    case cudaMemoryTypeManaged:
      return memory_kind::cuda_managed;
    case cudaMemoryTypeDevice:
      return from_memory_pool(ptr) ? memory_kind::cuda_mempool : memory_kind::cuda_device;
  }
  return memory_kind::unknown;
}

bool cuda_backend::from_memory_pool(const void* ptr) const noexcept {
  if (pointer_get_attribute_ == nullptr) {
    return false;
  }
  CUmemoryPool pool = nullptr;
  const CUresult result = pointer_get_attribute_(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
                                                 reinterpret_cast<CUdeviceptr>(ptr));
  return result == CUDA_SUCCESS && pool != nullptr;
}

bool cuda_backend::is_capturing(stream_view stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  const cudaError_t status = cudaStreamIsCapturing(to_cuda(stream), &capture);
  if (status == cudaErrorStreamCaptureImplicit) {
    // The legacy stream while a blocking stream captures: anything enqueued on it would join
    // the capture, so for the caller it is capturing. The query invalidates nothing.
    static_cast<void>(cudaGetLastError());
    return true;
  }
  if (status != cudaSuccess) {
    detail::throw_cuda_error(status, "cudaStreamIsCapturing", describe_stream(stream), __FILE__,
                             __LINE__);
  }
  return capture != cudaStreamCaptureStatusNone;
}

void cuda_backend::launch_host_func(stream_view stream, void (*fn)(void*), void* arg) {
  UMA_CUDA_CHECK(cudaLaunchHostFunc(to_cuda(stream), fn, arg),
                 "host function on " + describe_stream(stream));
}

void cuda_backend::wait_stream(stream_view stream) {
  // An event recorded now: later work on the stream does not extend the wait.
  cudaEvent_t event = nullptr;
  UMA_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                 "event to wait for " + describe_stream(stream));
  const cudaError_t recorded = cudaEventRecord(event, to_cuda(stream));
  const cudaError_t waited = recorded == cudaSuccess ? cudaEventSynchronize(event) : recorded;
  static_cast<void>(cudaEventDestroy(event));
  UMA_CUDA_CHECK(waited, "waiting for " + describe_stream(stream));
}

void* cuda_backend::create_event() {
  cudaEvent_t event = nullptr;
  UMA_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                 "event for the caching layer");
  return event;
}

void cuda_backend::record_event(void* event, stream_view stream) {
  UMA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), to_cuda(stream)),
                 "recording an event on " + describe_stream(stream));
}

bool cuda_backend::event_done(void* event) {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (status == cudaErrorNotReady)
    return false;
  UMA_CUDA_CHECK(status, "querying an event of the caching layer");
  return true;
}

void cuda_backend::destroy_event(void* event) noexcept {
  static_cast<void>(cudaEventDestroy(static_cast<cudaEvent_t>(event)));
}

void cuda_backend::prepare_thread() noexcept {
  if (const cudaError_t status = cudaSetDevice(0); status != cudaSuccess)
    log(log_level::error, std::string("a worker thread could not make device 0 current: ") +
                              cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

void cuda_backend::synchronize() {
  device_guard guard;
  for (const auto& device : devices_) {
    guard.set(device.ordinal);
    UMA_CUDA_CHECK(cudaDeviceSynchronize(), "device " + std::to_string(device.ordinal));
  }
}

backend_counters cuda_backend::counters() const noexcept {
  backend_counters out;
  out.allocations = counters_.allocations.load(std::memory_order_relaxed);
  out.frees = counters_.frees.load(std::memory_order_relaxed);
  out.bad_frees = counters_.bad_frees.load(std::memory_order_relaxed);
  out.prefetch_calls = counters_.prefetch_calls.load(std::memory_order_relaxed);
  out.batch_calls = counters_.batch_calls.load(std::memory_order_relaxed);
  out.discard_calls = counters_.discard_calls.load(std::memory_order_relaxed);
  out.advise_calls = counters_.advise_calls.load(std::memory_order_relaxed);
  out.live_allocations = counters_.live_allocations.load(std::memory_order_relaxed);
  out.live_bytes = counters_.live_bytes.load(std::memory_order_relaxed);
  out.tier_allocations = counters_.tier_allocations.load(std::memory_order_relaxed);
  out.tier_frees = counters_.tier_frees.load(std::memory_order_relaxed);
  out.copies = counters_.copies.load(std::memory_order_relaxed);
  out.copy_bytes = counters_.copy_bytes.load(std::memory_order_relaxed);
  return out;
}

}  // namespace detail

cuda_probe_result probe_cuda() noexcept {
  cuda_probe_result result;
  try {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      result.reason = "cudaGetDeviceCount failed: " + detail::describe_cuda_status(status);
      if (status == cudaErrorInsufficientDriver) {
        result.reason += "; no NVIDIA driver is loaded, or it is older than this CUDA runtime";
      }
      return result;
    }
    if (count <= 0) {
      result.reason = "no CUDA device: cudaGetDeviceCount reports 0 devices";
      return result;
    }
    result.usable = true;
    result.device_count = count;
  } catch (...) {
    // Only building the reason can throw (bad_alloc); report "not usable" without one.
    result = cuda_probe_result{};
  }
  return result;
}

std::shared_ptr<backend> make_cuda_backend() {
  auto probe = probe_cuda();
  if (!probe.usable) {
    raise(errc::no_device, "CUDA backend unavailable: " + probe.reason);
  }
  return std::make_shared<detail::cuda_backend>(probe.device_count);
}

}  // namespace uma
