#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include <uma/sys/backend.hpp>
#include <uma/sys/location.hpp>
#include <uma/sys/work_queue.hpp>

namespace uma {

/// The allocator's off-loop workers, one FIFO thread per lane: lane 0 (`general`: advice,
/// attributes, frees, discards, prefetches to mixed places), lane 1 (prefetches to
/// host memory) and lane 2 + d (prefetches to device d), each started on first use. A 4 GiB
/// prefetch to one GPU (its host call blocks for the whole transfer) then holds up neither
/// another GPU's prefetches nor advice and frees.
///
/// Stream order: while a job on a stream is unfinished, later jobs on the same stream go to the
/// same lane, so that a stream receives its operations in request order. Jobs on different
/// lanes run in any order relative to each other. Not thread-safe: used under the
/// allocator incarnation's guard, by the actor or a caller call (jobs run on the lanes' threads),
/// and by the incarnation's `close` once it is its only user.
class worker_lanes {
 public:
  static constexpr std::size_t general = 0;

  /// `on_start` runs on each lane's thread before its first job (backend::prepare_thread).
  explicit worker_lanes(std::function<void()> on_start = {});
  worker_lanes(const worker_lanes&) = delete;
  worker_lanes& operator=(const worker_lanes&) = delete;
  /// Runs what is queued, then joins every lane.
  ~worker_lanes() = default;

  /// The lane for a prefetch to `destinations` (one per range): the device's or host's lane when
  /// they all agree, else the general lane.
  [[nodiscard]] static std::size_t for_destinations(std::span<const location> destinations);

  /// The lane a job on `stream` runs on: `preferred`, unless an unfinished job on the same
  /// stream runs elsewhere. Counts the job until `finish_stream` is called for it.
  [[nodiscard]] std::size_t begin_stream(std::size_t preferred, stream_view stream);
  /// A job counted by begin_stream has finished (its reply is on the way).
  void finish_stream(stream_view stream) noexcept;
  /// True while a job counted by begin_stream on `stream` is unfinished.
  [[nodiscard]] bool stream_busy(stream_view stream) const noexcept {
    return streams_.contains(stream.handle);
  }

  /// Queues `job` on `lane` (started now if it was not yet).
  void post(std::size_t lane, std::function<void()> job);
  /// Runs `done` (on a lane's thread) once every lane has run what was queued before. The
  /// barrier's own markers do not count in `pending()`.
  void barrier(std::function<void()> done);
  /// Jobs queued or running on every lane.
  [[nodiscard]] std::size_t pending() const;
  /// Lanes started so far.
  [[nodiscard]] std::size_t started() const noexcept;
  /// Runs what is queued on every lane, then stops them; later posts run inline.
  void drain_and_stop() noexcept;

 private:
  struct stream_use {
    std::size_t lane = 0;
    std::size_t unfinished = 0;
  };

  std::function<void()> on_start_;
  std::vector<std::unique_ptr<work_queue>> lanes_;
  std::unordered_map<void*, stream_use> streams_;
};

}  // namespace uma
