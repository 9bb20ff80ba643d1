#include <uma/actors/detail/inline_unit.hpp>

#include <map>
#include <memory>
#include <mutex>

#include <caf/abstract_actor.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

namespace uma::detail {

namespace {

#if defined(__SANITIZE_THREAD__)
#define UMA_INLINE_UNIT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UMA_INLINE_UNIT_TSAN 1
#endif
#endif

/// Whether actors run on the sending thread. Not under ThreadSanitizer: Debian's libcaf_core is
/// not instrumented, so TSan cannot see the mailbox's atomics that hand an actor from the thread
/// that ran it here to the worker that runs it next, and would report the actor's own state as
/// racing with itself (tests/tsan.supp). There every job goes to the scheduler, as a plain
/// send's would; the reply slots, the sink and the spinning lanes stay checked.
#ifdef UMA_INLINE_UNIT_TSAN
constexpr bool resume_here = false;
#else
constexpr bool resume_here = true;
#endif

/// The jobs queued by sends on this thread while it is inside inline_unit::send, or null.
thread_local std::vector<caf::resumable*>* ready_here = nullptr;
/// The unit whose send this thread is inside.
thread_local inline_unit* unit_here = nullptr;

}  // namespace

inline_unit& inline_unit::of(caf::actor_system& sys) {
  // Never freed (reachable from this static): actors keep a unit as their context after the
  // client that used it is gone. A system at the address of a destroyed one reuses its unit,
  // which only stores that address.
  static std::mutex mutex;
  static auto* units = new std::map<caf::actor_system*, std::unique_ptr<inline_unit>>;
  std::lock_guard lock(mutex);
  auto& u = (*units)[&sys];
  if (!u)
    u.reset(new inline_unit(sys));
  return *u;
}

void inline_unit::exec_later(caf::resumable* job) {
  if (resume_here && unit_here == this && ready_here != nullptr) {
    ready_here->push_back(job);
    return;
  }
  system().scheduler().enqueue(job);
}

void inline_unit::send(const caf::strong_actor_ptr& dest, caf::mailbox_element_ptr element,
                       const std::function<bool()>& done, std::size_t jobs) {
  std::vector<caf::resumable*> ready;
  // Nested sends (an actor resumed here that itself calls a blocking facade) keep their own list.
  const auto outer_list = std::exchange(ready_here, &ready);
  const auto outer_unit = std::exchange(unit_here, this);
  dest->enqueue(std::move(element), this);
  run(ready, done, jobs);
  ready_here = outer_list;
  unit_here = outer_unit;
}

void inline_unit::run(std::vector<caf::resumable*>& ready, const std::function<bool()>& done,
                      std::size_t jobs) {
  std::size_t next = 0;
  for (std::size_t ran = 0; next < ready.size() && ran < jobs && !(done && done()); ++ran) {
    auto* job = ready[next++];
    switch (job->resume(this, throughput)) {
      case caf::resumable::resume_later:
        system().scheduler().enqueue(job);  // keeps its reference
        break;
      case caf::resumable::done:
      case caf::resumable::awaiting_message:
      case caf::resumable::shutdown_execution_unit:
        caf::intrusive_ptr_release(job);
        break;
    }
  }
  // Actors made ready and not run here (the reply came, or enough ran): a worker takes them.
  for (; next < ready.size(); ++next)
    system().scheduler().enqueue(ready[next]);
}

void send_inline(const caf::strong_actor_ptr& dest, caf::message content) {
  if (!dest)
    return;
  inline_unit::of(*dest->home_system)
      .send(dest,
            caf::make_mailbox_element(nullptr, caf::make_message_id(), {}, std::move(content)));
}

}  // namespace uma::detail
