#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace uma {

/// One thread that runs jobs in the order they were posted. The allocator actor hands it every
/// backend call that may block (a CUDA prefetch host call blocks for about the whole transfer,
/// cudaFree synchronizes the device), so that the actor keeps serving other requests. FIFO order
/// keeps per-region ordering: advice, prefetch and free of one region run in request order.
///
/// After its last job the thread spins for `spin_limit` before it parks on the condition
/// variable (docs/design.md "Blocking callers"): a job posted meanwhile starts without a
/// futex wake-up (~75 µs on a VM), and a post notifies only a parked thread.
class work_queue {
 public:
  /// How long an idle thread watches for the next job before it parks.
  static constexpr auto spin_limit = std::chrono::microseconds(50);

  /// Starts the thread; `on_start` runs on it before the first job.
  explicit work_queue(std::function<void()> on_start = {});
  work_queue(const work_queue&) = delete;
  work_queue& operator=(const work_queue&) = delete;
  /// Runs what is queued, then joins the thread.
  ~work_queue();

  /// Queues `job`; it must not throw (exceptions escaping a job terminate the process).
  /// `counted = false` leaves it out of `pending()` (a marker, such as a flush barrier, that
  /// reports the queue's progress and must not count itself).
  void post(std::function<void()> job, bool counted = true);
  /// Runs every queued job, then stops the thread. Later posts run inline on the caller. Called
  /// from one of the queue's own jobs, it runs the queued jobs itself and detaches the thread,
  /// which then ends on its own.
  void drain_and_stop() noexcept;
  /// Jobs queued and not yet finished.
  [[nodiscard]] std::size_t pending() const;

 private:
  /// Shared with the thread, which may outlive this object (see drain_and_stop).
  struct state {
    std::mutex mutex;
    std::condition_variable wake;
    struct entry {
      std::function<void()> fn;
      bool counted = true;
    };
    std::deque<entry> jobs;
    std::atomic<std::size_t> queued{0};  ///< jobs.size(), read by the spinning thread unlocked
    bool parked = false;                 ///< the thread waits on `wake`
    std::size_t counted_jobs = 0;        ///< queued jobs that count in pending()
    std::size_t running = 0;             ///< counted jobs running
    bool stopping = false;
  };
  static void run(state& s);
  /// Spins (unlocked) until a job is queued or `spin_limit` passed (a stop waits it out).
  static void spin(state& s, std::unique_lock<std::mutex>& lock);

  std::shared_ptr<state> state_;
  std::thread thread_;
};

}  // namespace uma
