#include <uma/actors/detail/caller_side.hpp>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <new>
#include <string>

#include <uma/actors/detail/allocation_core.hpp>
#include <uma/actors/detail/lane_allocation.hpp>
#include <uma/actors/detail/residency_core.hpp>
#include <uma/memory/allocation_handoff.hpp>
#include <uma/memory/control_block.hpp>
#include <uma/sys/detail/spin_wait.hpp>
#include <uma/sys/worker_lanes.hpp>

namespace uma::detail {

bool core_lock::try_lock_until(std::chrono::steady_clock::time_point deadline) noexcept {
  if (mutex_.try_lock() ||
      spin_until([this] { return mutex_.try_lock(); }, spin_mutex::spin_limit)) {
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    return true;
  }
  // The actor runs something long (a backend call on its thread, post_stop): poll, backing off.
  auto pause = std::chrono::microseconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(pause);
    if (mutex_.try_lock()) {
      owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
      return true;
    }
    pause = std::min(pause * 2, std::chrono::microseconds(200));
  }
  return false;
}

/// The core lock for a scope, taken as a call takes it: before the deadline, and only while the
/// incarnation has not ended.
class caller_side::entered {
 public:
  entered(core_lock& lock, const std::atomic<bool>& ended, deadline until) : lock_(lock) {
    if (!lock_.try_lock_until(until))
      raise(errc::timeout, "the allocator did not let the call in before the client's timeout");
    if (ended.load(std::memory_order_relaxed)) {
      lock_.unlock();
      raise(errc::allocator_stopped, "the allocator stopped before the request was served");
    }
  }
  entered(const entered&) = delete;
  entered& operator=(const entered&) = delete;
  ~entered() { lock_.unlock(); }

 private:
  core_lock& lock_;
};

caller_side::failure caller_side::failure_of(std::exception_ptr thrown) {
  try {
    std::rethrow_exception(thrown);
  } catch (const error& e) {
    return {thrown, e.code(), is_fatal(e), e.what()};  // thrown as it is: a fatal_error stays one
  } catch (const std::bad_alloc&) {
    const error e(errc::out_of_memory, "host memory exhausted while serving a request");
    return {std::make_exception_ptr(e), e.code(), false, e.what()};
  } catch (const std::exception& x) {
    const error e(errc::backend_error, x.what());
    return {std::make_exception_ptr(e), e.code(), false, e.what()};
  }
}

void caller_side::raise_after(const failure& f) {
  if (f.fatal)
    control_.report_fatal(error(f.code, f.what));  // no lock held: the actor quits
  std::rethrow_exception(f.thrown);
}

caller_side::caller_side(allocation_core& core, residency_core& residency, worker_lanes& lanes,
                         control_block& control, std::shared_ptr<backend> b)
    : core_(core),
      residency_(residency),
      lanes_(lanes),
      control_(control),
      backend_(std::move(b)),
      stack_(core.resources()) {}

template <class Part>
auto caller_side::locked(deadline until, Part&& part) {
  std::optional<failure> failed;
  {
    entered in(lock_, ended_, until);
    try {
      return part();
    } catch (...) {
      failed = failure_of(std::current_exception());
      core_.count_failure(failed->code);
    }
  }
  raise_after(*failed);
}

void caller_side::count_then_raise(const failure& f, deadline until) {
  try {
    entered in(lock_, ended_, until);
    core_.count_failure(f.code);
  } catch (const error&) {
    // Stopped or timed out meanwhile: the failure is not counted, the caller still gets it.
  }
  raise_after(f);
}

void caller_side::drain() {
  if (control_.has_releases())
    core_.drain_releases();
}

namespace {

/// The one more try of a refused region, on the general lane behind the frees queued before it
/// (as the actor's lane_allocation): shared by the job and the caller waiting for it. The memory
/// travels as an allocation_handoff, so that a caller that gave up (its timeout) leaves nothing
/// behind: the last holder gives it back.
class lane_try {
 public:
  void run(const std::shared_ptr<memory_resource>& stack, const allocation_request& req) noexcept {
    std::optional<allocation_handoff> memory;
    std::exception_ptr thrown;
    try {
      memory = allocation_handoff(stack, stack->allocate(req));
    } catch (...) {
      thrown = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    memory_ = std::move(memory);
    thrown_ = thrown;
    done_ = true;
    done_signal_.notify_all();
  }

  /// The memory, or what the lane's try threw; `timeout` past `until`.
  [[nodiscard]] allocation wait_until(std::chrono::steady_clock::time_point until) {
    std::unique_lock lock(mutex_);
    if (!done_signal_.wait_until(lock, until, [this] { return done_; }))
      raise(errc::timeout,
            "the allocator's retry behind the frees did not end before the client's timeout");
    if (thrown_)
      std::rethrow_exception(thrown_);
    return *memory_->take();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_signal_;
  bool done_ = false;
  std::optional<allocation_handoff> memory_;
  std::exception_ptr thrown_;
};

}  // namespace

std::optional<byte_ref> caller_side::allocate(const allocate_request& r, deadline until) {
  auto req = locked(until, [&]() -> std::optional<allocation_request> {
    drain();  // their frees go first: the quota may need them
    auto q = core_.checked_request(r);
    if (core_.as_block(q) || q.kind != memory_kind::cuda_managed)
      return std::nullopt;  // the actor takes the block (and retries a refused slab) or tier
    ++active_;
    return q;
  });
  if (!req)
    return std::nullopt;
  std::optional<allocation> memory;
  std::optional<failure> refused;
  try {
    memory = stack_->allocate(*req);
  } catch (...) {
    refused = failure_of(std::current_exception());
  }
  finished();  // before any lock: post_stop holds it while it waits for the active calls
  if (refused) {
    if (refused->fatal || !retried_on_lane(refused->code))
      count_then_raise(*refused, until);
    memory = retry_on_lane(*req, until);
  }
  std::optional<failure> failed;
  {
    std::optional<entered> in;
    try {
      in.emplace(lock_, ended_, until);
    } catch (...) {
      stack_->deallocate(*memory);  // stopped (or timed out) meanwhile: nothing stays behind
      throw;
    }
    try {
      return core_.adopt(*memory, req->attach);  // a failure gives the memory back itself
    } catch (...) {
      failed = failure_of(std::current_exception());
      core_.count_failure(failed->code);
    }
  }
  raise_after(*failed);
}

allocation caller_side::retry_on_lane(const allocation_request& req, deadline until) {
  // What the actor does with a refusal: the block allocator's idle slabs and the queued
  // releases go back (their frees queued on the general lane), then one more try behind them.
  // The wait is not counted as active: post_stop runs the lanes' work out after it ends the
  // calls, and the memory of a try that ends after the stop is given back by the caller.
  auto retry = std::make_shared<lane_try>();
  locked(until, [&] {
    (void)core_.blocks()->trim();
    drain();
    lanes_.post(worker_lanes::general, [stack = stack_, req, retry] { retry->run(stack, req); });
  });
  try {
    return retry->wait_until(until);
  } catch (...) {
    count_then_raise(failure_of(std::current_exception()), until);
  }
}

std::optional<op_result> caller_side::prefetch(const prefetch_request& r, bool discard_first,
                                               deadline until) {
  // The actor's order: a stream's operations go out in request order (an unfinished job on the
  // stream keeps later ones on its lane).
  auto work = locked(until, [&]() -> std::optional<allocation_core::prefetch_work> {
    if (lanes_.stream_busy(r.stream))
      return std::nullopt;
    drain();
    auto w = core_.prefetch_work_for(r, discard_first);
    ++active_;
    return w;
  });
  if (!work)
    return std::nullopt;
  std::exception_ptr thrown;
  try {
    const auto& m = work->merged;
    if (discard_first)
      backend_->discard_prefetch(m.ranges, m.locations, r.stream);
    else
      backend_->prefetch(m.ranges, m.locations, r.stream);
    if (r.reply_when == completion::complete)
      backend_->wait_stream(r.stream);
  } catch (...) {
    thrown = std::current_exception();
  }
  finished();
  if (thrown)
    count_then_raise(failure_of(thrown), until);
  locked(until, [&] { core_.count_prefetch(work->summary, discard_first); });
  return work->summary;
}

std::optional<op_result> caller_side::advise(const advise_request& r, deadline until) {
  return locked(until, [&]() -> std::optional<op_result> {
    drain();
    core_.check_advice(r);
    // Advice that reaches the runtime goes to the actor, whose general lane applies it in the
    // order it records it: what it knows of a region's advice is what the runtime has.
    if (!core_.changes_nothing(r))
      return std::nullopt;
    const auto work = core_.checked_advice(r);  // every ref elided: no backend call
    core_.count_advice(work.summary.ranges, 0);
    return work.summary;
  });
}

range_attributes caller_side::attributes(const byte_ref& ref, deadline until) {
  locked(until, [&] {
    (void)core_.check_refs({&ref, 1}, "attributes");
    ++active_;
  });
  std::exception_ptr thrown;
  range_attributes out;
  try {
    out = backend_->attributes(ref.range());
  } catch (...) {
    thrown = std::current_exception();
  }
  finished();
  if (thrown)
    count_then_raise(failure_of(thrown), until);
  return out;
}

std::optional<allocator_stats> caller_side::stats(deadline until) {
  return locked(until, [&]() -> std::optional<allocator_stats> {
    drain();  // as the actor's reply, it counts what was released before it
    return residency_.with_totals(core_.stats());
  });
}

bool caller_side::ended() const noexcept {
  return ended_.load(std::memory_order_acquire);
}

void caller_side::finished() noexcept {
  if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1)
    active_.notify_all();
}

void caller_side::end() noexcept {
  ended_.store(true, std::memory_order_release);
  for (auto n = active_.load(); n != 0; n = active_.load())
    active_.wait(n);
}

}  // namespace uma::detail
