#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <uma/sys/advice.hpp>
#include <uma/sys/device_capabilities.hpp>
#include <uma/sys/location.hpp>
#include <uma/sys/memory_kind.hpp>
#include <uma/sys/um_counters.hpp>
#include <uma/sys/vocabulary.hpp>

namespace uma {

/// The devices a host backend emulates (docs/design.md "Backends"): locations `device(0)` to
/// `device(count - 1)` that prefetch, advice, discard, attributes, can_access, budgets and plans
/// accept as on CUDA. Moves to them are recorded per page and counted; no data is copied (it all
/// stays in system memory). Ignored by the CUDA backend, whose devices are the GPUs.
struct emulated_devices {
  /// Most devices a host backend emulates.
  static constexpr int max_count = 64;
  /// How many, 0 to max_count (0: no device locations at all, as a host with no GPU).
  int count = 1;
  /// Memory of each in bytes, what budgets and plans count against; 0 takes the host backend's
  /// default quota (half of physical memory).
  std::uint64_t memory_bytes = 0;
  friend bool operator==(const emulated_devices&, const emulated_devices&) = default;
};

/// A byte range inside one managed allocation.
struct byte_range {
  void* ptr = nullptr;
  std::size_t bytes = 0;
};

/// Advice and prefetch state of a range, as `cudaMemRangeGetAttribute` reports it: a field is
/// set only when every page of the range agrees on it.
struct range_attributes {
  bool read_mostly = false;
  std::optional<location> preferred_location{};      ///< none, or pages disagree
  std::vector<location> accessed_by{};               ///< sorted, devices only
  std::optional<location> last_prefetch_location{};  ///< none yet, or pages disagree

  friend bool operator==(const range_attributes&, const range_attributes&) = default;
};

/// Calls made into the backend, counted by the backend itself: tests use these to prove that
/// a region was freed exactly once, that a batch used the batch entry point, and so on.
struct backend_counters {
  std::uint64_t allocations = 0;       ///< successful allocate_managed calls
  std::uint64_t frees = 0;             ///< successful free_managed calls
  std::uint64_t bad_frees = 0;         ///< free_managed of a pointer the backend did not hand out
  std::uint64_t prefetch_calls = 0;    ///< single-range prefetch calls into the runtime
  std::uint64_t batch_calls = 0;       ///< batch entry point calls (prefetch, discard, both)
  std::uint64_t discard_calls = 0;     ///< single-range discard (or discard+prefetch) calls
  std::uint64_t advise_calls = 0;      ///< advise calls into the runtime
  std::uint64_t live_allocations = 0;  ///< managed and tier allocations not yet freed
  std::uint64_t live_bytes = 0;        ///< their bytes
  std::uint64_t tier_allocations = 0;  ///< successful allocate_tier calls
  std::uint64_t tier_frees = 0;        ///< successful free_tier calls
  std::uint64_t copies = 0;            ///< copy calls that enqueued (or made) a copy
  std::uint64_t copy_bytes = 0;
};

/// The CUDA-free interface every backend implements. All functions validate nothing that the
/// caller (the allocator actor) is responsible for; they throw `uma::error` / `uma::cuda_error`
/// naming the failing call, the error and the sizes when the runtime refuses.
///
/// Thread-safety: every member may be called from any thread; callers serialize per region.
class backend {
 public:
  backend() = default;
  backend(const backend&) = delete;
  backend& operator=(const backend&) = delete;
  virtual ~backend() = default;

  /// `host` or `cuda`.
  [[nodiscard]] virtual backend_kind kind() const noexcept = 0;
  /// One line for logs and `uma info`: backend, devices, versions.
  [[nodiscard]] virtual std::string description() const = 0;
  /// Number of usable devices: the GPUs on CUDA, the emulated devices on the host backend.
  [[nodiscard]] virtual int device_count() const noexcept = 0;
  /// Cached capabilities of device `ordinal` (on the host backend an emulated device's, which
  /// say so in `name`); throws `invalid_argument` for a bad ordinal.
  [[nodiscard]] virtual const device_capabilities& capabilities(int ordinal) const = 0;
  /// Number of host NUMA nodes (at least 1).
  [[nodiscard]] virtual int host_numa_nodes() const noexcept = 0;
  /// Alignment every allocate_managed result has without padding.
  [[nodiscard]] virtual std::size_t guaranteed_alignment() const noexcept = 0;
  /// A quota no request may pass by default: a safe fraction of the memory free at start.
  [[nodiscard]] virtual std::size_t default_quota() const = 0;

  /// Allocates `bytes` (> 0) of managed memory. Throws `error(out_of_memory)` naming the size,
  /// or `cuda_error` for other failures.
  [[nodiscard]] virtual void* allocate_managed(std::size_t bytes, attach_flag attach) = 0;
  /// Frees what allocate_managed returned. Never throws: a failure is logged and counted
  /// (`cudaErrorCudartUnloading` at process exit is accepted silently).
  virtual void free_managed(void* ptr, std::size_t bytes) noexcept = 0;

  /// Allocates `bytes` (> 0) of a tier (docs/design.md "Tiers"): `memory_kind::pinned_host`,
  /// page-locked host memory (CUDA: `cudaHostAlloc`, portable), or `memory_kind::cuda_device`,
  /// memory of device `device` (CUDA: `cudaMalloc` with that device current; the calling
  /// thread's device is left as it was). `device` is ignored for the host tier. The host
  /// backend gives page-aligned system memory for both (its devices are emulated). Throws
  /// `error(out_of_memory)` naming the size, `invalid_argument` for another kind or a bad
  /// device, or `cuda_error`.
  [[nodiscard]] virtual void* allocate_tier(memory_kind kind, std::size_t bytes, int device) = 0;
  /// Frees what allocate_tier returned (the same kind, bytes and device). Never throws: a
  /// failure is logged and counted, as in free_managed.
  virtual void free_tier(memory_kind kind, void* ptr, std::size_t bytes, int device) noexcept = 0;
  /// Copies `bytes` from `src` to `dst` in stream order (CUDA: `cudaMemcpyAsync` with
  /// `cudaMemcpyDefault`: between page-locked host memory and device memory it runs on the copy
  /// engines and returns once enqueued). The host backend copies before it returns. The
  /// caller checked both ranges; throws `cuda_error` naming the call and the sizes.
  virtual void copy(void* dst, const void* src, std::size_t bytes, stream_view stream) = 0;

  /// Prefetches `ranges` to `locations` (size 1: broadcast; else paired by index). N > 1 uses
  /// the batch entry point where the runtime has it. Returns when the work is enqueued.
  virtual void prefetch(std::span<const byte_range> ranges, std::span<const location> locations,
                        stream_view stream) = 0;
  /// Discards the contents of `ranges` (their pages become undefined until written).
  virtual void discard(std::span<const byte_range> ranges, stream_view stream) = 0;
  /// Discards `ranges` and prefetches them to `locations` (broadcast or paired).
  virtual void discard_prefetch(std::span<const byte_range> ranges,
                                std::span<const location> locations, stream_view stream) = 0;
  /// Applies `a` to `range`; `loc` is ignored for read-mostly and unset-preferred advice.
  virtual void advise(byte_range range, advice a, location loc) = 0;
  /// Reads back advice and prefetch state of `range`.
  [[nodiscard]] virtual range_attributes attributes(byte_range range) = 0;

  /// What kind of memory `ptr` points to.
  [[nodiscard]] virtual memory_kind kind_of(const void* ptr) = 0;
  /// True while `stream` is capturing a graph. Throws `invalid_argument` for a stream this
  /// backend cannot have (any non-null stream on the host backend).
  [[nodiscard]] virtual bool is_capturing(stream_view stream) = 0;
  /// Runs `fn(arg)` on a runtime thread once `stream` reaches this point. `fn` must not call
  /// into the runtime. The host backend runs it at once (its work is synchronous).
  virtual void launch_host_func(stream_view stream, void (*fn)(void*), void* arg) = 0;
  /// Blocks the calling thread until `stream` has finished what was queued on it so far (work
  /// queued later is not waited for). The host backend returns at once.
  virtual void wait_stream(stream_view stream) = 0;
  /// Waits for all work on every device.
  virtual void synchronize() = 0;

  /// Makes an event for stream-order checks (CUDA: `cudaEventCreateWithFlags(
  /// cudaEventDisableTiming)`); never null. Streams of this base are synchronous, so its events
  /// are tokens that are always complete (the host backend). Throws the runtime's error.
  [[nodiscard]] virtual void* create_event();
  /// Records `event` on `stream`: it completes once the stream has run what was queued on it so
  /// far (CUDA: `cudaEventRecord`). Any stream value is a token here (synchronous streams).
  virtual void record_event(void* event, stream_view stream);
  /// True once the work `event` was last recorded after has finished (CUDA: `cudaEventQuery`);
  /// an event never recorded is complete. Throws the runtime's error (not `cudaErrorNotReady`).
  [[nodiscard]] virtual bool event_done(void* event);
  /// Destroys an event from create_event. Never throws.
  virtual void destroy_event(void* event) noexcept;
  /// Readies the calling thread for backend calls; each of the allocator's worker threads calls
  /// it once before its first job. CUDA: makes device 0 current, which binds the primary context
  /// (some runtime calls, cudaMemRangeGetAttribute among them, fail with
  /// cudaErrorDeviceUninitialized on a thread that has none). Never throws.
  virtual void prepare_thread() noexcept {}

  /// Snapshot of the call counters.
  [[nodiscard]] virtual backend_counters counters() const noexcept = 0;

  /// Subscribes to the driver's unified-memory counters (sys/um_counters.hpp). This base has
  /// none and says so; the CUDA backend loads CUPTI. Never throws for a missing driver feature:
  /// `why_not` names it.
  [[nodiscard]] virtual um_counter_source subscribe_um_counters();
};

/// "host" / "cuda".
[[nodiscard]] std::string_view to_string(backend_kind k) noexcept;
/// "auto" / "cuda" / "host".
[[nodiscard]] std::string_view to_string(backend_choice c) noexcept;
/// Parses "auto", "cuda" or "host"; nullopt otherwise.
[[nodiscard]] std::optional<backend_choice> parse_backend_choice(std::string_view text) noexcept;

/// True when this build has the CUDA backend compiled in.
[[nodiscard]] bool cuda_backend_compiled() noexcept;

/// Creates the backend `choice` names; a host backend emulates `host_devices`. `automatic`
/// never fails for lack of a GPU (a missing driver means "not usable"); `cuda` throws
/// `error(no_device)` naming the reason; a bad `host_devices` throws `error(invalid_argument)`.
[[nodiscard]] std::shared_ptr<backend> make_backend(backend_choice choice,
                                                    const emulated_devices& host_devices = {});

}  // namespace uma
