#pragma once

// A worker pipeline over one allocator actor: producer actors request batches of managed
// floats, fill them on the host, prefetch them to GPU 0, transform them there (a CUDA kernel; on
// the host backend a host loop), bring them back and hand the refs by message to consumer
// actors, which verify every element. Used by examples/worker_pipeline.cpp and by `uma demo`.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/actor_system.hpp>

#include <uma/actors/managed_allocator.hpp>
#include <uma/memory/allocator_stats.hpp>

namespace uma::pipeline {

/// The shape of one run.
struct pipeline_options {
  std::size_t producers = 2;         ///< producer actors
  std::size_t consumers = 2;         ///< consumer actors
  std::size_t batches = 8;           ///< batches each producer makes
  std::size_t floats = 1 << 16;      ///< floats per batch
  std::chrono::seconds timeout{60};  ///< the run gives up (and fails) past this
};

/// Where a run's transform step ran.
enum class compute_target : std::uint8_t {
  host_loop,   ///< host backend: prefetch to the host, a loop on the producer's thread
  gpu_kernel,  ///< CUDA backend: prefetch to GPU 0, a kernel on the producer's stream
};

/// "host loop" / "CUDA kernel on GPU 0".
[[nodiscard]] std::string_view to_string(compute_target target) noexcept;

/// Where a run is, reported after every finished batch.
struct pipeline_progress {
  std::size_t finished = 0;    ///< batches verified or failed so far
  std::size_t total = 0;       ///< batches the run makes
  std::size_t mismatched = 0;  ///< batches with at least one wrong element so far
  std::size_t failed = 0;      ///< batches that never reached a consumer (error replies)
};

/// Called on the thread that called `run_pipeline`, once per finished batch.
using progress_callback = std::function<void(const pipeline_progress&)>;

/// What a run did.
struct pipeline_result {
  compute_target target = compute_target::host_loop;
  std::size_t batches = 0;                ///< batches the run was to make
  std::size_t verified = 0;               ///< batches a consumer checked
  std::size_t mismatched_batches = 0;     ///< checked batches with a wrong element
  std::size_t mismatched_elements = 0;    ///< wrong elements in all
  std::vector<std::string> errors;        ///< failed requests, timeouts, in arrival order
  allocator_stats stats;                  ///< the allocator's counters after a flush at the end
  std::uint64_t live_regions_before = 0;  ///< live regions of the allocator when the run began
  std::chrono::nanoseconds elapsed{0};    ///< from the first request to the last verification

  /// True when every batch was verified without a wrong element, nothing failed, and once every
  /// actor had stopped the allocator held no more regions than before the run.
  [[nodiscard]] bool ok() const noexcept {
    return errors.empty() && verified == batches && mismatched_batches == 0 &&
           stats.live_regions == live_regions_before;
  }
};

/// The value consumers expect at element `index` of batch `batch` of producer `producer`:
/// what the transform makes of what the producer wrote.
[[nodiscard]] float expected_value(std::uint32_t producer, std::uint32_t batch,
                                   std::size_t index) noexcept;

/// Runs the pipeline against `allocator` (whose actor system is `sys`; uma's types must be
/// registered on it) and waits for it: spawns the producers and consumers, collects every
/// verification, stops the actors, then flushes the allocator so the result's stats show what
/// was left live. Throws `uma::error`: invalid_argument for a zero count, or the allocator's
/// error when it does not answer the first stats request (allocator_stopped when it is gone).
/// Failures during the run (quota, out of memory, a stopped allocator, a kernel launch) and a
/// stall past `options.timeout` are reported in `errors`, not thrown.
[[nodiscard]] pipeline_result run_pipeline(caf::actor_system& sys,
                                           const managed_allocator_actor& allocator,
                                           const pipeline_options& options,
                                           const progress_callback& progress = {});

/// "2 producers x 8 batches of 65536 floats (256 KiB) -> 2 consumers".
[[nodiscard]] std::string describe(const pipeline_options& options);

/// "16/16 batches verified (CUDA kernel on GPU 0) in 3.2 ms, 0 mismatched, 0 failed,
/// live regions after flush: 0", then one line per error.
[[nodiscard]] std::string summarize(const pipeline_result& result);

}  // namespace uma::pipeline
