#include <uma/sys/cuda_backend.hpp>

// cuda.h is included for the driver API's types only (CUresult, CUpointer_attribute): its one
// function is reached through cudaGetDriverEntryPointByVersion, so libcuda is never linked and
// the binary starts on machines without a driver.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <uma/sys/cuda_check.hpp>
#include <uma/sys/detail/format.hpp>
#include <uma/sys/log.hpp>

namespace uma {

namespace {

using detail::describe_bytes;
using detail::describe_cuda_status;
using detail::hex;

/// `cuPointerGetAttribute` as of CUDA 12.0 (its ABI is unchanged since 4.0). The version is
/// pinned so that a newer driver never hands back a differently shaped `_v2`.
using pointer_get_attribute_fn = CUresult(CUDAAPI*)(void*, CUpointer_attribute, CUdeviceptr);
constexpr unsigned int pointer_get_attribute_abi = 12000;

/// Runtime and driver version from which the batch prefetch/discard entry points exist.
constexpr int batch_api_version = 13000;

[[nodiscard]] cudaStream_t to_cuda(stream_view stream) noexcept {
  return static_cast<cudaStream_t>(stream.handle);
}

/// The batch entry points refuse the legacy NULL stream. The per-thread default stream is a
/// blocking stream, so it is ordered against legacy-stream work both ways and stands in for it.
[[nodiscard]] cudaStream_t to_cuda_batch_stream(stream_view stream) noexcept {
  return stream.handle == nullptr ? cudaStreamPerThread : to_cuda(stream);
}

[[nodiscard]] cudaMemLocation to_cuda(const location& loc) noexcept {
  cudaMemLocation out{};
  switch (loc.type) {
    case location::kind::device:
      out.type = cudaMemLocationTypeDevice;
      out.id = loc.id;
      break;
    case location::kind::host:
      out.type = cudaMemLocationTypeHost;
      out.id = 0;
      break;
    case location::kind::host_numa:
      out.type = cudaMemLocationTypeHostNuma;
      out.id = loc.id;
      break;
    case location::kind::host_numa_current:
      out.type = cudaMemLocationTypeHostNumaCurrent;
      out.id = 0;
      break;
  }
  return out;
}

/// The location a range attribute names; none for `cudaMemLocationTypeInvalid` (no location, or
/// the pages disagree).
[[nodiscard]] std::optional<location> from_cuda(cudaMemLocationType type, int id) noexcept {
  switch (type) {
    case cudaMemLocationTypeDevice:
      return location::device(id);
    case cudaMemLocationTypeHost:
      return location::host();
    case cudaMemLocationTypeHostNuma:
      return location::host_numa(id);
    case cudaMemLocationTypeHostNumaCurrent:
      return location::host_numa_current();
    default:
      return std::nullopt;
  }
}

/// A location used where CUDA ignores it; the host is valid for every advice.
constexpr cudaMemLocation ignored_location{cudaMemLocationTypeHost, 0};

/// 13000 -> "13.0".
[[nodiscard]] std::string version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

[[nodiscard]] std::string describe_stream(stream_view stream) {
  return stream.handle == nullptr ? std::string("the default stream")
                                  : "stream " + hex(stream.handle);
}

[[nodiscard]] std::string describe_range(const byte_range& range) {
  return "range " + hex(range.ptr) + " of " + describe_bytes(range.bytes);
}

/// "8 ranges (first range 0x... of ..., 64 MiB in all) to device 0 on stream 0x...".
[[nodiscard]] std::string describe_batch(std::span<const byte_range> ranges,
                                         std::span<const location> locations, stream_view stream) {
  std::size_t total = 0;
  for (const auto& range : ranges) {
    total += range.bytes;
  }
  std::string text = std::to_string(ranges.size()) + " range(s) (first " +
                     (ranges.empty() ? std::string("none") : describe_range(ranges.front())) +
                     ", " + describe_bytes(total) + " in all)";
  if (locations.size() == 1) {
    text += " to " + to_string(locations.front());
  } else if (!locations.empty()) {
    text += " to " + std::to_string(locations.size()) + " paired locations (first " +
            to_string(locations.front()) + ")";
  }
  return text + " on " + describe_stream(stream);
}

/// Number of /sys/devices/system/node/node<N> directories; 1 when there are none.
[[nodiscard]] int count_host_numa_nodes() noexcept {
  try {
    std::error_code ec;
    int nodes = 0;
    for (std::filesystem::directory_iterator it("/sys/devices/system/node", ec), end;
         !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.size() > 4 && name.starts_with("node") &&
          std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        ++nodes;
      }
    }
    return std::max(nodes, 1);
  } catch (...) {
    return 1;
  }
}

/// The calling thread's current device is per-thread runtime state: restore it on scope exit.
class device_guard {
 public:
  device_guard() { UMA_CUDA_CHECK(cudaGetDevice(&previous_), "saving the current device"); }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  ~device_guard() { static_cast<void>(cudaSetDevice(previous_)); }

  /// Makes `ordinal` current.
  void set(int ordinal) {
    UMA_CUDA_CHECK(cudaSetDevice(ordinal), "device " + std::to_string(ordinal));
  }

 private:
  int previous_ = 0;
};

/// The parallel arrays the batch entry points take. Runs of equal consecutive locations share
/// one `prefetchLocs` entry: `prefetchLocIdxs[k]` is the first operation `prefetchLocs[k]`
/// applies to, and it applies up to the next entry's first operation (or to the end).
struct batch_arrays {
  std::vector<void*> ptrs;
  std::vector<std::size_t> sizes;
  std::vector<cudaMemLocation> locations;
  std::vector<std::size_t> first_indices;

  batch_arrays(std::span<const byte_range> ranges, std::span<const location> targets) {
    ptrs.reserve(ranges.size());
    sizes.reserve(ranges.size());
    for (const auto& range : ranges) {
      ptrs.push_back(range.ptr);
      sizes.push_back(range.bytes);
    }
    for (std::size_t i = 0; i < targets.size(); ++i) {
      if (i == 0 || targets[i] != targets[i - 1]) {
        locations.push_back(to_cuda(targets[i]));
        first_indices.push_back(i);
      }
    }
  }
};

/// The call counters, each updated on its own (the snapshot need not be one instant).
struct atomic_counters {
  std::atomic<std::uint64_t> allocations{0};
  std::atomic<std::uint64_t> frees{0};
  std::atomic<std::uint64_t> bad_frees{0};
  std::atomic<std::uint64_t> prefetch_calls{0};
  std::atomic<std::uint64_t> batch_calls{0};
  std::atomic<std::uint64_t> discard_calls{0};
  std::atomic<std::uint64_t> advise_calls{0};
  std::atomic<std::uint64_t> live_allocations{0};
  std::atomic<std::uint64_t> live_bytes{0};
};

void bump(std::atomic<std::uint64_t>& counter, std::uint64_t by = 1) noexcept {
  counter.fetch_add(by, std::memory_order_relaxed);
}

/// The backend over every device the CUDA runtime sees. Capabilities are queried once at
/// construction and immutable after; mutable state is atomics plus the live-allocation table
/// under its mutex, so every member may be called from any thread.
class cuda_backend final : public backend {
 public:
  explicit cuda_backend(int device_count) {
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

  [[nodiscard]] backend_kind kind() const noexcept override { return backend_kind::cuda; }

  [[nodiscard]] std::string description() const override {
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

  [[nodiscard]] int device_count() const noexcept override {
    return static_cast<int>(devices_.size());
  }

  [[nodiscard]] const device_capabilities& capabilities(int ordinal) const override {
    if (ordinal < 0 || ordinal >= device_count()) {
      raise(errc::invalid_argument, "capabilities: no CUDA device " + std::to_string(ordinal) +
                                        " (" + std::to_string(device_count()) + " device(s))");
    }
    return devices_[static_cast<std::size_t>(ordinal)];
  }

  [[nodiscard]] int host_numa_nodes() const noexcept override { return host_numa_nodes_; }

  /// cudaMallocManaged returns at least 256-byte aligned memory (in practice page aligned).
  [[nodiscard]] std::size_t guaranteed_alignment() const noexcept override { return 256; }

  /// 3/4 of the smallest free memory of any device, measured on the first call.
  [[nodiscard]] std::size_t default_quota() const override {
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

  [[nodiscard]] void* allocate_managed(std::size_t bytes, attach_flag attach) override {
    void* ptr = nullptr;
    const unsigned int flags =
        attach == attach_flag::host ? cudaMemAttachHost : cudaMemAttachGlobal;
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

  void free_managed(void* ptr, std::size_t bytes) noexcept override {
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

  void prefetch(std::span<const byte_range> ranges, std::span<const location> locations,
                stream_view stream) override {
    check_pairing("prefetch", ranges, locations);
    if (ranges.empty()) {
      return;
    }
    // The batch entry point refuses the legacy stream; single calls keep its exact ordering.
    if (ranges.size() > 1 && stream.handle != nullptr && batch_enabled()) {
      batch_arrays arrays(ranges, locations);
      const cudaError_t status = cudaMemPrefetchBatchAsync(
          arrays.ptrs.data(), arrays.sizes.data(), arrays.ptrs.size(), arrays.locations.data(),
          arrays.first_indices.data(), arrays.locations.size(), 0, to_cuda(stream));
      if (status == cudaSuccess) {
        bump(counters_.batch_calls);
        return;
      }
      if (!batch_refused(status, "cudaMemPrefetchBatchAsync")) {
        detail::throw_cuda_error(status, "cudaMemPrefetchBatchAsync",
                                 describe_batch(ranges, locations, stream), __FILE__, __LINE__);
      }
    }
    prefetch_each(ranges, locations, stream);
  }

  void discard(std::span<const byte_range> ranges, stream_view stream) override {
    if (ranges.empty() || !batch_enabled()) {
      // Without the discard entry point, leaving the contents as they are is a valid discard:
      // the contents are undefined afterwards, and the old ones are one possible value.
      return;
    }
    batch_arrays arrays(ranges, {});
    const cudaError_t status =
        cudaMemDiscardBatchAsync(arrays.ptrs.data(), arrays.sizes.data(), arrays.ptrs.size(), 0,
                                 to_cuda_batch_stream(stream));
    if (status == cudaSuccess) {
      count_discard(ranges.size());
      return;
    }
    if (!batch_refused(status, "cudaMemDiscardBatchAsync")) {
      detail::throw_cuda_error(status, "cudaMemDiscardBatchAsync",
                               "discarding " + describe_batch(ranges, {}, stream), __FILE__,
                               __LINE__);
    }
  }

  void discard_prefetch(std::span<const byte_range> ranges, std::span<const location> locations,
                        stream_view stream) override {
    check_pairing("discard_prefetch", ranges, locations);
    if (ranges.empty()) {
      return;
    }
    if (batch_enabled()) {
      batch_arrays arrays(ranges, locations);
      const cudaError_t status = cudaMemDiscardAndPrefetchBatchAsync(
          arrays.ptrs.data(), arrays.sizes.data(), arrays.ptrs.size(), arrays.locations.data(),
          arrays.first_indices.data(), arrays.locations.size(), 0, to_cuda_batch_stream(stream));
      if (status == cudaSuccess) {
        count_discard(ranges.size());
        return;
      }
      if (!batch_refused(status, "cudaMemDiscardAndPrefetchBatchAsync")) {
        detail::throw_cuda_error(
            status, "cudaMemDiscardAndPrefetchBatchAsync",
            "discarding and prefetching " + describe_batch(ranges, locations, stream), __FILE__,
            __LINE__);
      }
    }
    // Without the entry point, a discard that keeps the contents followed by a prefetch.
    prefetch_each(ranges, locations, stream);
  }

  void advise(byte_range range, advice a, location loc) override {
    cudaMemoryAdvise cuda_advice = cudaMemAdviseSetReadMostly;
    switch (a) {
      case advice::set_read_mostly:
        cuda_advice = cudaMemAdviseSetReadMostly;
        break;
      case advice::unset_read_mostly:
        cuda_advice = cudaMemAdviseUnsetReadMostly;
        break;
      case advice::set_preferred_location:
        cuda_advice = cudaMemAdviseSetPreferredLocation;
        break;
      case advice::unset_preferred_location:
        cuda_advice = cudaMemAdviseUnsetPreferredLocation;
        break;
      case advice::set_accessed_by:
        cuda_advice = cudaMemAdviseSetAccessedBy;
        break;
      case advice::unset_accessed_by:
        cuda_advice = cudaMemAdviseUnsetAccessedBy;
        break;
      default:
        raise(errc::invalid_argument,
              "advise: unknown advice " + std::to_string(static_cast<int>(a)));
    }
    const bool uses_location = advice_takes_location(a);
    const cudaMemLocation where = uses_location ? to_cuda(loc) : ignored_location;
    UMA_CUDA_CHECK(cudaMemAdvise(range.ptr, range.bytes, cuda_advice, where),
                   std::string(to_string(a)) + " on " + describe_range(range) +
                       (uses_location ? " for " + to_string(loc) : std::string()));
    bump(counters_.advise_calls);
  }

  [[nodiscard]] range_attributes attributes(byte_range range) override {
    range_attributes out;
    int read_mostly = 0;
    get_range_attribute(&read_mostly, sizeof(read_mostly), cudaMemRangeAttributeReadMostly,
                        "ReadMostly", range);
    out.read_mostly = read_mostly != 0;

    out.preferred_location = get_location_attribute(
        cudaMemRangeAttributePreferredLocationType, "PreferredLocationType",
        cudaMemRangeAttributePreferredLocationId, "PreferredLocationId", range);

    // One slot per device plus one for the CPU (accessed-by may name the host); unused slots
    // come back as cudaInvalidDeviceId.
    std::vector<int> accessed(devices_.size() + 1, cudaInvalidDeviceId);
    get_range_attribute(accessed.data(), accessed.size() * sizeof(int),
                        cudaMemRangeAttributeAccessedBy, "AccessedBy", range);
    for (const int id : accessed) {
      if (id >= 0) {
        out.accessed_by.push_back(location::device(id));
      }
    }
    std::sort(out.accessed_by.begin(), out.accessed_by.end());

    out.last_prefetch_location = get_location_attribute(
        cudaMemRangeAttributeLastPrefetchLocationType, "LastPrefetchLocationType",
        cudaMemRangeAttributeLastPrefetchLocationId, "LastPrefetchLocationId", range);
    return out;
  }

  [[nodiscard]] memory_kind kind_of(const void* ptr) override {
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

  [[nodiscard]] bool is_capturing(stream_view stream) override {
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

  void launch_host_func(stream_view stream, void (*fn)(void*), void* arg) override {
    UMA_CUDA_CHECK(cudaLaunchHostFunc(to_cuda(stream), fn, arg),
                   "host function on " + describe_stream(stream));
  }

  void wait_stream(stream_view stream) override {
    // An event recorded now: later work on the stream does not extend the wait.
    cudaEvent_t event = nullptr;
    UMA_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                   "event to wait for " + describe_stream(stream));
    const cudaError_t recorded = cudaEventRecord(event, to_cuda(stream));
    const cudaError_t waited = recorded == cudaSuccess ? cudaEventSynchronize(event) : recorded;
    static_cast<void>(cudaEventDestroy(event));
    UMA_CUDA_CHECK(waited, "waiting for " + describe_stream(stream));
  }

  void prepare_thread() noexcept override {
    if (const cudaError_t status = cudaSetDevice(0); status != cudaSuccess)
      log(log_level::error, std::string("a worker thread could not make device 0 current: ") +
                                cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }

  void synchronize() override {
    device_guard guard;
    for (const auto& device : devices_) {
      guard.set(device.ordinal);
      UMA_CUDA_CHECK(cudaDeviceSynchronize(), "device " + std::to_string(device.ordinal));
    }
  }

  [[nodiscard]] backend_counters counters() const noexcept override {
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
    return out;
  }

 private:
  [[nodiscard]] static device_capabilities query_device(int ordinal) {
    const std::string which = "device " + std::to_string(ordinal);
    cudaDeviceProp properties{};
    UMA_CUDA_CHECK(cudaGetDeviceProperties(&properties, ordinal), which);
    device_capabilities caps;
    caps.ordinal = ordinal;
    caps.name = properties.name;
    caps.compute_major = properties.major;
    caps.compute_minor = properties.minor;
    caps.total_memory = properties.totalGlobalMem;
    const auto flag = [&](cudaDeviceAttr attribute, const char* name) {
      int value = 0;
      UMA_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, ordinal),
                     std::string(name) + " of " + which);
      return value != 0;
    };
    caps.managed_memory = flag(cudaDevAttrManagedMemory, "cudaDevAttrManagedMemory");
    caps.concurrent_managed_access =
        flag(cudaDevAttrConcurrentManagedAccess, "cudaDevAttrConcurrentManagedAccess");
    caps.pageable_memory_access =
        flag(cudaDevAttrPageableMemoryAccess, "cudaDevAttrPageableMemoryAccess");
    caps.pageable_uses_host_page_tables = flag(cudaDevAttrPageableMemoryAccessUsesHostPageTables,
                                               "cudaDevAttrPageableMemoryAccessUsesHostPageTables");
    caps.host_native_atomics =
        flag(cudaDevAttrHostNativeAtomicSupported, "cudaDevAttrHostNativeAtomicSupported");
    caps.direct_managed_access_from_host = flag(cudaDevAttrDirectManagedMemAccessFromHost,
                                                "cudaDevAttrDirectManagedMemAccessFromHost");
    caps.memory_pools = flag(cudaDevAttrMemoryPoolsSupported, "cudaDevAttrMemoryPoolsSupported");
    // cudaDevAttrHostNumaId exists since CUDA 12.2; an older driver refuses it: no NUMA id then.
    int numa = -1;
    if (cudaDeviceGetAttribute(&numa, cudaDevAttrHostNumaId, ordinal) != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      numa = -1;
    }
    caps.host_numa_id = numa;
    return caps;
  }

  /// The driver's cuPointerGetAttribute, or null when the driver cannot provide it (then no
  /// pointer is recognised as pool memory).
  [[nodiscard]] static pointer_get_attribute_fn resolve_pointer_get_attribute() noexcept {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t status = cudaGetDriverEntryPointByVersion(
        "cuPointerGetAttribute", &fn, pointer_get_attribute_abi, cudaEnableDefault, &found);
    if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
      static_cast<void>(cudaGetLastError());
      return nullptr;
    }
    return reinterpret_cast<pointer_get_attribute_fn>(fn);
  }

  /// True when `ptr` (device memory) came from a stream-ordered memory pool.
  [[nodiscard]] bool from_memory_pool(const void* ptr) const noexcept {
    if (pointer_get_attribute_ == nullptr) {
      return false;
    }
    CUmemoryPool pool = nullptr;
    const CUresult result = pointer_get_attribute_(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
                                                   reinterpret_cast<CUdeviceptr>(ptr));
    return result == CUDA_SUCCESS && pool != nullptr;
  }

  [[nodiscard]] bool batch_enabled() const noexcept {
    return batch_available_.load(std::memory_order_relaxed);
  }

  /// True when `status` says the batch entry points do not exist here (an old driver behind a
  /// new runtime): switches to single calls for good and reports it once.
  bool batch_refused(cudaError_t status, const char* call) noexcept {
    if (status != cudaErrorNotSupported && status != cudaErrorCallRequiresNewerDriver) {
      return false;
    }
    static_cast<void>(cudaGetLastError());
    if (batch_available_.exchange(false, std::memory_order_relaxed)) {
      log(log_level::warning, std::string(call) + ": " + cudaGetErrorName(status) + " (" +
                                  cudaGetErrorString(status) +
                                  "); using single-range calls from now on");
    }
    return true;
  }

  /// A discard that went through a batch entry point: one range counts as a single discard,
  /// more as a batch.
  void count_discard(std::size_t ranges) noexcept {
    bump(ranges == 1 ? counters_.discard_calls : counters_.batch_calls);
  }

  static void check_pairing(const char* what, std::span<const byte_range> ranges,
                            std::span<const location> locations) {
    if (!ranges.empty() && locations.size() != 1 && locations.size() != ranges.size()) {
      raise(errc::invalid_argument, std::string(what) + ": " + std::to_string(ranges.size()) +
                                        " ranges but " + std::to_string(locations.size()) +
                                        " locations (need 1 or one per range)");
    }
  }

  void prefetch_each(std::span<const byte_range> ranges, std::span<const location> locations,
                     stream_view stream) {
    for (std::size_t i = 0; i < ranges.size(); ++i) {
      const byte_range& range = ranges[i];
      const location& target = locations.size() == 1 ? locations.front() : locations[i];
      UMA_CUDA_CHECK(
          cudaMemPrefetchAsync(range.ptr, range.bytes, to_cuda(target), 0, to_cuda(stream)),
          describe_range(range) + " to " + to_string(target) + " on " + describe_stream(stream));
      bump(counters_.prefetch_calls);
    }
  }

  static void get_range_attribute(void* data, std::size_t size, cudaMemRangeAttribute attribute,
                                  const char* name, const byte_range& range) {
    UMA_CUDA_CHECK(cudaMemRangeGetAttribute(data, size, attribute, range.ptr, range.bytes),
                   std::string("cudaMemRangeAttribute") + name + " of " + describe_range(range));
  }

  [[nodiscard]] static std::optional<location> get_location_attribute(
      cudaMemRangeAttribute type_attribute, const char* type_name,
      cudaMemRangeAttribute id_attribute, const char* id_name, const byte_range& range) {
    cudaMemLocationType type = cudaMemLocationTypeInvalid;
    int id = 0;
    get_range_attribute(&type, sizeof(type), type_attribute, type_name, range);
    get_range_attribute(&id, sizeof(id), id_attribute, id_name, range);
    return from_cuda(type, id);
  }

  std::vector<device_capabilities> devices_;
  int runtime_version_ = 0;
  int driver_version_ = 0;
  int host_numa_nodes_ = 1;
  pointer_get_attribute_fn pointer_get_attribute_ = nullptr;
  std::atomic<bool> batch_available_{false};

  mutable std::once_flag quota_once_;
  mutable std::size_t quota_ = 0;

  std::mutex live_mutex_;
  std::unordered_map<void*, std::size_t> live_;  ///< live allocations: pointer -> bytes
  atomic_counters counters_;
};

}  // namespace

cuda_probe_result probe_cuda() noexcept {
  cuda_probe_result result;
  try {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      result.reason = "cudaGetDeviceCount failed: " + describe_cuda_status(status);
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
  return std::make_shared<cuda_backend>(probe.device_count);
}

}  // namespace uma
