// The CUDA backend's range operations: prefetch, discard, advice and range attributes, through
// the batch entry points where the runtime has them.

#include <algorithm>
#include <array>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <uma/sys/cuda_backend_impl.hpp>
#include <uma/sys/cuda_check.hpp>
#include <uma/sys/log.hpp>

namespace uma::detail {

namespace {

/// The batch entry points refuse the legacy NULL stream. The per-thread default stream is a
/// blocking stream, so it is ordered against legacy-stream work both ways and stands in for it.
[[nodiscard]] cudaStream_t to_cuda_batch_stream(stream_view stream) noexcept {
  return stream.handle == nullptr ? cudaStreamPerThread : to_cuda(stream);
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

/// `query()`, a cudaMemRangeGetAttributes call; throws its failure naming `range`. Unlike most
/// runtime calls, it does not make the current device's primary context current on a thread
/// that made no runtime call yet (the facade's callers run it on their own threads):
/// cudaFree(nullptr) does, leaving the thread's current device as it was, and it runs once more.
template <class Query>
void query_range(Query query, const byte_range& range) {
  auto status = query();
  if (status == cudaErrorDeviceUninitialized) {
    (void)cudaGetLastError();  // not sticky
    if (cudaFree(nullptr) == cudaSuccess)
      status = query();
  }
  if (status != cudaSuccess) [[unlikely]]
    detail::throw_cuda_error(status, "cudaMemRangeGetAttributes",
                             "the range attributes of " + describe_range(range), __FILE__,
                             __LINE__);
}

}  // namespace

cudaMemLocation to_cuda(const location& loc) noexcept {
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

void cuda_backend::prefetch(std::span<const byte_range> ranges, std::span<const location> locations,
                            stream_view stream) {
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

void cuda_backend::discard(std::span<const byte_range> ranges, stream_view stream) {
  if (ranges.empty() || !batch_enabled()) {
    // Without the discard entry point, leaving the contents as they are is a valid discard:
    // the contents are undefined afterwards, and the old ones are one possible value.
    return;
  }
  batch_arrays arrays(ranges, {});
  const cudaError_t status = cudaMemDiscardBatchAsync(
      arrays.ptrs.data(), arrays.sizes.data(), arrays.ptrs.size(), 0, to_cuda_batch_stream(stream));
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

void cuda_backend::discard_prefetch(std::span<const byte_range> ranges,
                                    std::span<const location> locations, stream_view stream) {
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

void cuda_backend::advise(byte_range range, advice a, location loc) {
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

range_attributes cuda_backend::attributes(byte_range range) {
  // Every attribute in one runtime call: at eight threads the driver serializes its calls, and
  // six single-attribute calls cost ~10 us a query (H200), their p99 40-60 us.
  int read_mostly = 0;
  cudaMemLocationType preferred_type = cudaMemLocationTypeInvalid;
  int preferred_id = 0;
  // One slot per device plus one for the CPU (accessed-by may name the host); unused slots
  // come back as cudaInvalidDeviceId.
  std::vector<int> accessed(devices_.size() + 1, cudaInvalidDeviceId);
  cudaMemLocationType last_type = cudaMemLocationTypeInvalid;
  int last_id = 0;
  std::array<void*, 6> data{&read_mostly,    &preferred_type, &preferred_id,
                            accessed.data(), &last_type,      &last_id};
  std::array<std::size_t, 6> sizes{sizeof(read_mostly),  sizeof(preferred_type),
                                   sizeof(preferred_id), accessed.size() * sizeof(int),
                                   sizeof(last_type),    sizeof(last_id)};
  std::array<cudaMemRangeAttribute, 6> which{cudaMemRangeAttributeReadMostly,
                                             cudaMemRangeAttributePreferredLocationType,
                                             cudaMemRangeAttributePreferredLocationId,
                                             cudaMemRangeAttributeAccessedBy,
                                             cudaMemRangeAttributeLastPrefetchLocationType,
                                             cudaMemRangeAttributeLastPrefetchLocationId};
  query_range(
      [&] {
        return cudaMemRangeGetAttributes(data.data(), sizes.data(), which.data(), which.size(),
                                         range.ptr, range.bytes);
      },
      range);
  range_attributes out;
  out.read_mostly = read_mostly != 0;
  out.preferred_location = from_cuda(preferred_type, preferred_id);
  for (const int id : accessed) {
    if (id >= 0) {
      out.accessed_by.push_back(location::device(id));
    }
  }
  std::sort(out.accessed_by.begin(), out.accessed_by.end());
  out.last_prefetch_location = from_cuda(last_type, last_id);
  return out;
}

bool cuda_backend::batch_refused(cudaError_t status, const char* call) noexcept {
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

void cuda_backend::count_discard(std::size_t ranges) noexcept {
  bump(ranges == 1 ? counters_.discard_calls : counters_.batch_calls);
}

void cuda_backend::check_pairing(const char* what, std::span<const byte_range> ranges,
                                 std::span<const location> locations) {
  if (!ranges.empty() && locations.size() != 1 && locations.size() != ranges.size()) {
    raise(errc::invalid_argument, std::string(what) + ": " + std::to_string(ranges.size()) +
                                      " ranges but " + std::to_string(locations.size()) +
                                      " locations (need 1 or one per range)");
  }
}

void cuda_backend::prefetch_each(std::span<const byte_range> ranges,
                                 std::span<const location> locations, stream_view stream) {
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const byte_range& range = ranges[i];
    const location& target = locations.size() == 1 ? locations.front() : locations[i];
    UMA_CUDA_CHECK(
        cudaMemPrefetchAsync(range.ptr, range.bytes, to_cuda(target), 0, to_cuda(stream)),
        describe_range(range) + " to " + to_string(target) + " on " + describe_stream(stream));
    bump(counters_.prefetch_calls);
  }
}

}  // namespace uma::detail
