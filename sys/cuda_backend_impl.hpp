#pragma once

// The CUDA backend's class and the helpers its sources share. Private to sys/cuda_*.cpp (it
// includes CUDA headers; it is not installed): sys/cuda_backend.cpp holds construction, memory
// and streams, sys/cuda_backend_ops.cpp prefetch, discard, advice and range attributes,
// sys/cuda_capabilities.cpp the device queries.

// cuda.h is included for the driver API's types only (CUresult, CUpointer_attribute): its one
// function is reached through cudaGetDriverEntryPointByVersion, so libcuda is never linked and
// the binary starts on machines without a driver.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <uma/sys/backend.hpp>
#include <uma/sys/cuda_check.hpp>

namespace uma::detail {

/// `cuPointerGetAttribute` as of CUDA 12.0 (its ABI is unchanged since 4.0). The version is
/// pinned so that a newer driver never hands back a differently shaped `_v2`.
using pointer_get_attribute_fn = CUresult(CUDAAPI*)(void*, CUpointer_attribute, CUdeviceptr);
constexpr unsigned int pointer_get_attribute_abi = 12000;

/// Runtime and driver version from which the batch prefetch/discard entry points exist.
constexpr int batch_api_version = 13000;

[[nodiscard]] inline cudaStream_t to_cuda(stream_view stream) noexcept {
  return static_cast<cudaStream_t>(stream.handle);
}

/// The CUDA spelling of `loc`.
[[nodiscard]] cudaMemLocation to_cuda(const location& loc) noexcept;

/// "the default stream" / "stream 0x...".
[[nodiscard]] std::string describe_stream(stream_view stream);

/// "range 0x... of N bytes (...)".
[[nodiscard]] std::string describe_range(const byte_range& range);

/// 13000 -> "13.0".
[[nodiscard]] std::string version_text(int version);

/// Number of /sys/devices/system/node/node<N> directories; 1 when there are none.
[[nodiscard]] int count_host_numa_nodes() noexcept;

/// Capabilities of device `ordinal`, queried from the runtime (batch_api left false).
[[nodiscard]] device_capabilities query_device(int ordinal);

/// The driver's cuPointerGetAttribute, or null when the driver cannot provide it (then no
/// pointer is recognised as pool memory).
[[nodiscard]] pointer_get_attribute_fn resolve_pointer_get_attribute() noexcept;

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
  std::atomic<std::uint64_t> tier_allocations{0};
  std::atomic<std::uint64_t> tier_frees{0};
  std::atomic<std::uint64_t> copies{0};
  std::atomic<std::uint64_t> copy_bytes{0};
};

inline void bump(std::atomic<std::uint64_t>& counter, std::uint64_t by = 1) noexcept {
  counter.fetch_add(by, std::memory_order_relaxed);
}

/// A subscription to CUPTI's unified-memory counters, or why there is none (sys/cuda_cupti.cpp).
[[nodiscard]] um_counter_source subscribe_cupti_um_counters();

/// The backend over every device the CUDA runtime sees. Capabilities are queried once at
/// construction and immutable after; mutable state is atomics plus the live-allocation table
/// under its mutex, so every member may be called from any thread.
class cuda_backend final : public backend {
 public:
  explicit cuda_backend(int device_count);

  [[nodiscard]] backend_kind kind() const noexcept override { return backend_kind::cuda; }
  [[nodiscard]] std::string description() const override;
  [[nodiscard]] int device_count() const noexcept override {
    return static_cast<int>(devices_.size());
  }
  [[nodiscard]] const device_capabilities& capabilities(int ordinal) const override;
  [[nodiscard]] int host_numa_nodes() const noexcept override { return host_numa_nodes_; }
  /// cudaMallocManaged returns at least 256-byte aligned memory (in practice page aligned).
  [[nodiscard]] std::size_t guaranteed_alignment() const noexcept override { return 256; }
  /// 3/4 of the smallest free memory of any device, measured on the first call.
  [[nodiscard]] std::size_t default_quota() const override;

  [[nodiscard]] void* allocate_managed(std::size_t bytes, attach_flag attach) override;
  void free_managed(void* ptr, std::size_t bytes) noexcept override;
  // The tiers and copies (sys/cuda_tiers.cpp).
  [[nodiscard]] void* allocate_tier(memory_kind kind, std::size_t bytes, int device) override;
  void free_tier(memory_kind kind, void* ptr, std::size_t bytes, int device) noexcept override;
  void copy(void* dst, const void* src, std::size_t bytes, stream_view stream) override;

  void prefetch(std::span<const byte_range> ranges, std::span<const location> locations,
                stream_view stream) override;
  void discard(std::span<const byte_range> ranges, stream_view stream) override;
  void discard_prefetch(std::span<const byte_range> ranges, std::span<const location> locations,
                        stream_view stream) override;
  void advise(byte_range range, advice a, location loc) override;
  [[nodiscard]] range_attributes attributes(byte_range range) override;

  [[nodiscard]] memory_kind kind_of(const void* ptr) override;
  [[nodiscard]] bool is_capturing(stream_view stream) override;
  void launch_host_func(stream_view stream, void (*fn)(void*), void* arg) override;
  void wait_stream(stream_view stream) override;
  [[nodiscard]] void* create_event() override;
  void record_event(void* event, stream_view stream) override;
  [[nodiscard]] bool event_done(void* event) override;
  void destroy_event(void* event) noexcept override;
  void prepare_thread() noexcept override;
  void synchronize() override;
  [[nodiscard]] backend_counters counters() const noexcept override;
  /// CUPTI's unified-memory counters (sys/cuda_cupti.cpp).
  [[nodiscard]] um_counter_source subscribe_um_counters() override {
    return subscribe_cupti_um_counters();
  }

 private:
  /// True when `ptr` (device memory) came from a stream-ordered memory pool.
  [[nodiscard]] bool from_memory_pool(const void* ptr) const noexcept;
  [[nodiscard]] bool batch_enabled() const noexcept {
    return batch_available_.load(std::memory_order_relaxed);
  }

  /// True when `status` says the batch entry points do not exist here (an old driver behind a
  /// new runtime): switches to single calls for good and reports it once.
  bool batch_refused(cudaError_t status, const char* call) noexcept;

  /// A discard that went through a batch entry point: one range counts as a single discard,
  /// more as a batch.
  void count_discard(std::size_t ranges) noexcept;

  static void check_pairing(const char* what, std::span<const byte_range> ranges,
                            std::span<const location> locations);
  void prefetch_each(std::span<const byte_range> ranges, std::span<const location> locations,
                     stream_view stream);

  std::vector<device_capabilities> devices_;
  int runtime_version_ = 0;
  int driver_version_ = 0;
  int host_numa_nodes_ = 1;
  pointer_get_attribute_fn pointer_get_attribute_ = nullptr;
  std::atomic<bool> batch_available_{false};

  mutable std::once_flag quota_once_;
  mutable std::size_t quota_ = 0;

  /// A live tier allocation: what free_tier must be given back.
  struct tier_record {
    memory_kind kind;
    std::size_t bytes;
    int device;
  };

  std::mutex live_mutex_;
  std::unordered_map<void*, std::size_t> live_;   ///< live allocations: pointer -> bytes
  std::unordered_map<void*, tier_record> tiers_;  ///< live tier allocations (under live_mutex_)
  atomic_counters counters_;
};

}  // namespace uma::detail
