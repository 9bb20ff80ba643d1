#include <uma/actors/detail/incarnation.hpp>

#include <future>
#include <type_traits>

#include <uma/actors/detail/allocator_stop.hpp>
#include <uma/actors/detail/error_reply.hpp>
#include <uma/actors/detail/lane_allocation.hpp>
#include <uma/actors/detail/operations.hpp>
#include <uma/memory/allocation_handoff.hpp>

namespace uma::detail {

incarnation::incarnation(allocator_config config, std::shared_ptr<backend> b)
    : config_(std::move(config)),
      backend_(std::move(b)),
      control_(std::make_shared<control_block>(config_.supervision.generation, backend_)),
      lanes_([runtime = backend_] { runtime->prepare_thread(); }),
      state_(std::make_unique<incarnation_state>(config_, backend_, control_, lanes_)),
      stack_(state_->core.resources()) {}

incarnation::~incarnation() {
  close();
}

void incarnation::close() noexcept {
  lanes_.drain_and_stop();  // idempotent: the stop ran them out already
  state_.reset();
}

incarnation::guard incarnation::locked(deadline until) {
  if (!lock_.try_lock_until(until))
    raise(errc::timeout, "the allocator did not let the call in before the client's timeout");
  if (ended_.load(std::memory_order_relaxed)) {
    lock_.unlock();
    raise(errc::allocator_stopped, "the allocator stopped before the request was served");
  }
  return {lock_, state_.get()};
}

incarnation::guard incarnation::locked() noexcept {
  lock_.lock();
  return {lock_, state_.get()};
}

void incarnation::stop(guard& g) noexcept {
  if (ended_.load(std::memory_order_relaxed))
    return;
  control_->begin_stop();  // refs go inert first
  ended_.store(true, std::memory_order_release);
  for (auto n = active_.load(); n != 0; n = active_.load())
    active_.wait(n);  // a caller's backend call in flight, as the lanes' work is
  stop_allocator({config_, *control_, lanes_, *backend_, g->core, g->residency, g->jobs.pending()});
  close();
}

bool incarnation::ended() const noexcept {
  return ended_.load(std::memory_order_acquire);
}

void incarnation::finished() noexcept {
  if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1)
    active_.notify_all();
}

void incarnation::raise_after(const failure& f) {
  if (f.fatal)
    control_->report_fatal(error(f.code, f.what));
  std::rethrow_exception(f.thrown);
}

template <class Part>
auto incarnation::under(deadline until, Part&& part) {
  std::optional<failure> failed;
  {
    auto g = locked(until);
    try {
      return part(*g);
    } catch (...) {
      failed = failure_of(std::current_exception());
      g->core.count_failure(failed->code);
    }
  }
  raise_after(*failed);
}

template <class Undo>
void incarnation::count_then_raise(const failure& f, deadline until, Undo&& undo) {
  try {
    auto g = locked(until);
    undo(*g);
    g->core.count_failure(f.code);
  } catch (const error&) {
    // Stopped or timed out meanwhile: the failure is not counted, the caller still gets it.
  }
  raise_after(f);
}

template <class Request, class Make>
auto incarnation::run_here(deadline until, const Request& r, Make&& make) {
  using step_t = decltype(make(std::declval<incarnation_state&>(), r));
  using reply_t = decltype(std::declval<step_t&>().summary);
  auto step = under(until, [&](incarnation_state& s) -> std::optional<step_t> {
    s.drain();  // as the actor drains before each request
    if (waits_its_turn(s, r))
      return std::nullopt;
    auto made = make(s, r);
    if (made.call)
      active_.fetch_add(1, std::memory_order_acq_rel);
    else
      made.end(s, made.summary);
    return made;
  });
  if (!step || !step->call)
    return step ? std::optional<reply_t>(std::move(step->summary)) : std::nullopt;
  std::optional<reply_t> reply;
  const auto failed = failure_in([&] {
    reply.emplace((*step->call)(*backend_));
    if (step->route.when == completion::complete)
      backend_->wait_stream(step->route.stream);  // what a prefetch's own lane does
  });
  finished();
  if (failed)
    count_then_raise(*failed, until, step->undo);
  if constexpr (!std::is_same_v<decltype(step->end), nothing_to_count>)
    under(until, [&](incarnation_state& s) { step->end(s, *reply); });
  return reply;
}

std::optional<op_result> incarnation::prefetch(const prefetch_request& r, bool discard_first,
                                               deadline until) {
  return run_here(until, r, [discard_first](incarnation_state& s, const prefetch_request& req) {
    return prefetch_step(s, req, discard_first);
  });
}

std::optional<op_result> incarnation::advise(const advise_request& r, deadline until) {
  return run_here(until, r, advise_step);
}

range_attributes incarnation::attributes(const byte_ref& ref, deadline until) {
  return *run_here(until, ref, attributes_step);
}

std::optional<allocator_stats> incarnation::stats(deadline until) {
  return under(until, [](incarnation_state& s) {
    s.drain();  // as the actor's reply, it counts what was released before it
    return std::optional<allocator_stats>(s.stats());
  });
}

std::optional<byte_ref> incarnation::allocate(const allocate_request& r, deadline until) {
  // A region's operation with its own shape: the call's result (memory) becomes the reply (a
  // ref) under the guard. A block or a tier is the actor's.
  auto req = under(until, [&](incarnation_state& s) -> std::optional<allocation_request> {
    s.drain();  // their frees go first: the quota may need them
    auto q = s.checked(r);
    if (s.core.as_block(q) || q.kind != memory_kind::cuda_managed)
      return std::nullopt;
    active_.fetch_add(1, std::memory_order_acq_rel);
    return q;
  });
  if (!req)
    return std::nullopt;
  std::optional<allocation> memory;
  const auto refused = failure_in([&] { memory = stack_->allocate(*req); });
  finished();
  if (refused && (refused->fatal || !retried_on_lane(refused->code)))
    count_then_raise(*refused, until, nothing_to_undo{});
  if (refused)
    memory = retry_on_lane(*req, until);
  bool in = false;
  try {
    return under(until, [&](incarnation_state& s) {
      in = true;
      return std::optional<byte_ref>(s.adopt(*memory, req->attach));  // gives it back on failure
    });
  } catch (...) {
    if (!in)
      stack_->deallocate(*memory);  // stopped (or timed out) meanwhile: nothing stays behind
    throw;
  }
}

allocation incarnation::retry_on_lane(const allocation_request& req, deadline until) {
  // The actor's one more try (make_room, then region_retry on the general lane behind the
  // frees), waited for here. Not counted as active: the stop runs the lanes' work out after it
  // ends the calls; a try the caller gave up on gives its memory back (allocation_handoff).
  auto retry = std::make_shared<std::promise<allocation_handoff>>();
  auto tried = retry->get_future();
  under(until, [&](incarnation_state& s) {
    (void)s.make_room();
    lanes_.post(worker_lanes::general, [stack = stack_, req, retry] {
      try {
        retry->set_value(region_retry(stack, req));
      } catch (...) {
        retry->set_exception(std::current_exception());
      }
    });
  });
  try {
    if (tried.wait_until(until) != std::future_status::ready)
      raise(errc::timeout,
            "the allocator's retry behind the frees did not end before the "
            "client's timeout");
    return *tried.get().take();
  } catch (...) {
    count_then_raise(failure_of(std::current_exception()), until, nothing_to_undo{});
  }
}

}  // namespace uma::detail
