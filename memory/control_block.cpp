#include <uma/memory/control_block.hpp>

#include <utility>

namespace uma::detail {

bool control_block::try_acquire_pin() noexcept {
  pins_.fetch_add(1, std::memory_order_seq_cst);
  if (state_.load(std::memory_order_seq_cst) == static_cast<int>(allocator_state::alive))
    return true;
  release_pin();
  return false;
}

void control_block::release_pin() noexcept {
  if (pins_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
      state_.load(std::memory_order_seq_cst) != static_cast<int>(allocator_state::alive)) {
    std::lock_guard lock(mutex_);  // the stopper checks its predicate under this lock
    pins_released_.notify_all();
  }
}

bool control_block::enqueue_release(std::uint64_t region_id) noexcept {
  hook<> wake;
  try {
    std::lock_guard lock(mutex_);
    if (!alive())
      return false;  // post_stop frees everything it still owns
    releases_.push_back(region_id);
    has_releases_.store(true, std::memory_order_release);
    wake = due_wake();
  } catch (...) {
    // Out of memory while queueing: the region stays in the table and is freed at stop.
    return false;
  }
  if (wake)
    wake();
  return true;
}

void control_block::enqueue_slab(region* home, std::uint32_t blocks) {
  std::lock_guard lock(mutex_);
  slabs_.push_back({home, blocks});
  has_releases_.store(true, std::memory_order_release);
}

void control_block::wake() noexcept {
  hook<> wake;
  try {
    std::lock_guard lock(mutex_);
    if (alive() && has_releases_.load(std::memory_order_relaxed))
      wake = due_wake();
  } catch (...) {
    return;  // the lock failed (std::system_error): the actor drains at its next message
  }
  if (wake)
    wake();
}

hook<> control_block::due_wake() {
  if (wake_pending_ || tick_armed_ || !waker_)
    return {};
  wake_pending_ = true;
  return waker_;
}

release_batch control_block::take_releases() {
  std::lock_guard lock(mutex_);
  wake_pending_ = false;
  has_releases_.store(false, std::memory_order_release);
  return {std::exchange(slabs_, {}), std::exchange(releases_, {})};
}

bool control_block::arm_tick() {
  std::lock_guard lock(mutex_);
  return !std::exchange(tick_armed_, true);
}

bool control_block::disarm_tick() {
  std::lock_guard lock(mutex_);
  if (!releases_.empty() || !slabs_.empty())
    return false;
  tick_armed_ = false;
  return true;
}

void control_block::set_waker(hook<> waker) {
  std::lock_guard lock(mutex_);
  waker_ = std::move(waker);
}

void control_block::set_on_fatal(hook<errc, const std::string&> on_fatal) {
  std::lock_guard lock(mutex_);
  on_fatal_ = std::move(on_fatal);
}

void control_block::report_fatal(const error& e) noexcept {
  try {
    hook<errc, const std::string&> on_fatal;
    {
      std::lock_guard lock(mutex_);
      on_fatal = on_fatal_;
    }
    if (on_fatal)
      on_fatal(e.code(), e.what());  // outside the lock: a message to the actor
  } catch (...) {
    // Host memory ran out for the text (or the lock failed): the caller still gets the error.
  }
}

void control_block::begin_stop() noexcept {
  state_.store(static_cast<int>(allocator_state::stopping), std::memory_order_seq_cst);
}

bool control_block::wait_for_pins(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return pins_released_.wait_for(lock, timeout, [this] { return pins_.load() == 0; });
}

void control_block::finish_stop(stop_report report) {
  hook<> old_waker;  // destroyed outside the lock
  hook<errc, const std::string&> old_on_fatal;
  {
    std::lock_guard lock(mutex_);
    report_ = std::move(report);
    releases_.clear();
    slabs_.clear();
    has_releases_.store(false, std::memory_order_release);
    old_waker = std::move(waker_);
    waker_ = {};
    old_on_fatal = std::move(on_fatal_);
    on_fatal_ = {};
  }
  state_.store(static_cast<int>(allocator_state::stopped), std::memory_order_seq_cst);
}

std::optional<stop_report> control_block::report() const {
  std::lock_guard lock(mutex_);
  return report_;
}

void drop_ref(region* r) noexcept {
  if (r->refs.fetch_sub(1, std::memory_order_acq_rel) != 1)
    return;  // other handles remain: never touch the record after the decrement
  if (r->is_block()) {
    block_dropped(r);
    return;
  }
  // The last user still owns the record: take what the release needs before letting go.
  auto control = r->control;
  const auto id = r->id;
  if (r->owners.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete r;  // the table let go already (post_stop freed or leaked the memory)
    return;
  }
  // The table still holds it: while the actor lives it frees the region; once it is stopping,
  // post_stop frees it (or has) and enqueue_release does nothing.
  (void)control->enqueue_release(id);
}

void drop_table_ref(region* r) noexcept {
  if (r->owners.fetch_sub(1, std::memory_order_acq_rel) == 1)
    delete r;
}

}  // namespace uma::detail
