#include <uma/sys/work_queue.hpp>

#include <uma/sys/detail/spin_wait.hpp>

namespace uma {

work_queue::work_queue(std::function<void()> on_start)
    : state_(std::make_shared<state>()), thread_([s = state_, start = std::move(on_start)] {
        if (start)
          start();
        run(*s);
      }) {}

work_queue::~work_queue() {
  drain_and_stop();
}

void work_queue::post(std::function<void()> job, bool counted) {
  {
    std::lock_guard lock(state_->mutex);
    if (!state_->stopping) {
      state_->jobs.push_back({std::move(job), counted});
      state_->queued.fetch_add(1, std::memory_order_release);
      state_->counted_jobs += counted ? 1 : 0;
      if (state_->parked)
        state_->wake.notify_one();
      return;
    }
  }
  job();
}

void work_queue::drain_and_stop() noexcept {
  if (thread_.joinable() && thread_.get_id() == std::this_thread::get_id()) {
    // Called from one of this queue's own jobs (the allocator's last handle went away inside
    // it, and its post_stop drains the lanes): run what is queued here, then let the thread
    // finish on its own. It owns the state, so nothing it touches goes away under it.
    for (;;) {
      std::function<void()> job;
      {
        std::lock_guard lock(state_->mutex);
        state_->stopping = true;
        if (state_->jobs.empty())
          break;
        job = std::move(state_->jobs.front().fn);
        state_->counted_jobs -= state_->jobs.front().counted ? 1 : 0;
        state_->jobs.pop_front();
        state_->queued.fetch_sub(1, std::memory_order_relaxed);
      }
      job();
    }
    thread_.detach();
    return;
  }
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    state_->wake.notify_one();
  }
  if (thread_.joinable())
    thread_.join();
}

std::size_t work_queue::pending() const {
  std::lock_guard lock(state_->mutex);
  return state_->counted_jobs + state_->running;
}

void work_queue::spin(state& s, std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  (void)detail::spin_until([&s] { return s.queued.load(std::memory_order_acquire) != 0; },
                           spin_limit);
  lock.lock();
}

void work_queue::run(state& s) {
  std::unique_lock lock(s.mutex);
  for (;;) {
    if (s.jobs.empty() && !s.stopping)
      spin(s, lock);
    s.parked = true;
    s.wake.wait(lock, [&s] { return s.stopping || !s.jobs.empty(); });
    s.parked = false;
    if (s.jobs.empty())
      return;  // stopping and drained
    auto job = std::move(s.jobs.front().fn);
    const bool counted = s.jobs.front().counted;
    s.jobs.pop_front();
    s.queued.fetch_sub(1, std::memory_order_relaxed);
    if (counted) {
      --s.counted_jobs;
      ++s.running;
    }
    lock.unlock();
    job();
    job = nullptr;  // destroyed unlocked: its captures may end the allocator (drain_and_stop)
    lock.lock();
    if (counted)
      --s.running;
  }
}

}  // namespace uma
