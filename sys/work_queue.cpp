#include "sys/work_queue.hpp"

namespace uma {

work_queue::work_queue(std::function<void()> on_start)
    : thread_([this, start = std::move(on_start)] {
        if (start)
          start();
        run();
      }) {}

work_queue::~work_queue() {
  drain_and_stop();
}

void work_queue::post(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      jobs_.push_back(std::move(job));
      wake_.notify_one();
      return;
    }
  }
  job();
}

void work_queue::drain_and_stop() noexcept {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable())
    thread_.join();
}

std::size_t work_queue::pending() const {
  std::lock_guard lock(mutex_);
  return jobs_.size() + running_;
}

void work_queue::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty())
      return;  // stopping and drained
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    ++running_;
    lock.unlock();
    job();
    lock.lock();
    --running_;
  }
}

}  // namespace uma
