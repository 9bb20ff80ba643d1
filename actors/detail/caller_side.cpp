#include <uma/actors/detail/caller_side.hpp>

#include <mutex>
#include <new>
#include <string>

#include <uma/actors/detail/allocation_core.hpp>
#include <uma/actors/detail/residency_core.hpp>
#include <uma/memory/advice_ops.hpp>
#include <uma/memory/control_block.hpp>
#include <uma/messages/error_category.hpp>
#include <uma/sys/detail/spin_wait.hpp>
#include <uma/sys/worker_lanes.hpp>

namespace uma::detail {

namespace {

/// What a caller call throws for `e`: a uma::error as it is, else as the actor's handlers turn
/// it into a reply (host memory: out_of_memory; anything else: backend_error).
error as_uma_error(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const error& u) {
    return u;
  } catch (const std::bad_alloc&) {
    return error(errc::out_of_memory, "host memory exhausted while serving a request");
  } catch (const std::exception& x) {
    return error(errc::backend_error, x.what());
  }
}

}  // namespace

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
  entered(core_lock& lock, bool& ended, deadline until) : lock_(lock) {
    if (!lock_.try_lock_until(until))
      raise(errc::backend_error,
            "the allocator did not let the call in before the client's timeout (request_timeout)");
    if (ended) {
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

caller_side::caller_side(allocation_core& core, residency_core& residency, worker_lanes& lanes,
                         control_block& control, std::shared_ptr<backend> b,
                         std::function<void(caf::error)> on_fatal)
    : core_(core),
      residency_(residency),
      lanes_(lanes),
      control_(control),
      backend_(std::move(b)),
      on_fatal_(std::move(on_fatal)) {}

template <class Part>
auto caller_side::locked(deadline until, Part&& part) {
  entered in(lock_, ended_, until);
  try {
    return part();
  } catch (const error& e) {
    core_.count_failure(e.code());
    throw;
  }
}

void caller_side::failed(const error& e, deadline until) {
  try {
    entered in(lock_, ended_, until);
    core_.count_failure(e.code());
  } catch (const error&) {
    // Stopped or timed out meanwhile: the failure is not counted, the caller still gets it.
  }
  if (is_fatal(e) && on_fatal_)
    on_fatal_(make_caf_error(e));
}

std::optional<op_result> caller_side::prefetch(const prefetch_request& r, bool discard_first,
                                               deadline until) {
  // The actor's order: new slabs and releases are drained first, and a stream's operations go
  // out in request order (an unfinished job on the stream keeps later ones on its lane).
  auto work = locked(until, [&]() -> std::optional<allocation_core::prefetch_work> {
    if (control_.has_releases() || lanes_.stream_busy(r.stream))
      return std::nullopt;
    auto w = core_.prefetch_work_for(r, discard_first);
    ++active_;
    return w;
  });
  if (!work)
    return std::nullopt;
  std::exception_ptr failure;
  try {
    const auto& m = work->merged;
    if (discard_first)
      backend_->discard_prefetch(m.ranges, m.locations, r.stream);
    else
      backend_->prefetch(m.ranges, m.locations, r.stream);
    if (r.reply_when == completion::complete)
      backend_->wait_stream(r.stream);
  } catch (...) {
    failure = std::current_exception();
  }
  if (--active_ == 0)
    active_.notify_all();
  if (failure) {
    const auto e = as_uma_error(failure);
    failed(e, until);
    throw e;
  }
  locked(until, [&] { core_.count_prefetch(work->summary, discard_first); });
  return work->summary;
}

std::optional<op_result> caller_side::advise(const advise_request& r, deadline until) {
  std::optional<op_result> elided;
  auto work = locked(until, [&]() -> std::optional<allocation_core::advice_work> {
    if (control_.has_releases())
      return std::nullopt;
    auto w = core_.checked_advice(r);
    if (w.todo.empty()) {
      core_.count_advice(w.summary.ranges, 0);
      elided = w.summary;
      return std::nullopt;
    }
    ++active_;
    return w;
  });
  if (!work)
    return elided;
  std::exception_ptr failure;
  try {
    apply_advice_whole(*backend_, work->todo, r.what, r.where);
  } catch (...) {
    failure = std::current_exception();
  }
  if (--active_ == 0)
    active_.notify_all();
  if (failure) {
    const auto e = as_uma_error(failure);
    locked(until, [&] { core_.forget_advice(work->touched); });
    failed(e, until);
    throw e;
  }
  locked(until, [&] { core_.count_advice(work->summary.ranges, 0); });
  return work->summary;
}

range_attributes caller_side::attributes(const byte_ref& ref, deadline until) {
  locked(until, [&] {
    (void)core_.check_refs({&ref, 1}, "attributes");
    ++active_;
  });
  std::exception_ptr failure;
  range_attributes out;
  try {
    out = backend_->attributes(ref.range());
  } catch (...) {
    failure = std::current_exception();
  }
  if (--active_ == 0)
    active_.notify_all();
  if (failure) {
    const auto e = as_uma_error(failure);
    failed(e, until);
    throw e;
  }
  return out;
}

std::optional<allocator_stats> caller_side::stats(deadline until) {
  return locked(until, [&]() -> std::optional<allocator_stats> {
    if (control_.has_releases())
      return std::nullopt;  // the actor drains them first: its reply counts them
    return residency_.with_totals(core_.stats());
  });
}

void caller_side::end() noexcept {
  ended_ = true;
  for (auto n = active_.load(); n != 0; n = active_.load())
    active_.wait(n);
}

}  // namespace uma::detail
