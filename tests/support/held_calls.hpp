#pragma once

// Tests that keep backend calls in flight (fault_injecting_backend::hold) and look at what the
// allocator does meanwhile: no sleeps, a held call lasts exactly as long as a test needs.

#include <chrono>
#include <cstdint>
#include <utility>

#include <gtest/gtest.h>
#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/client.hpp>
#include <uma/sys/fault_injecting_backend.hpp>

namespace uma::test {

/// Lets held backend calls go when a test ends early (a failed assertion), so that a stop (which
/// waits for them) cannot wait forever.
struct resume_on_exit {
  fault_injecting_backend& b;
  ~resume_on_exit() { b.resume(); }
};

/// The request `xs` sent to `dest` as a message from a scoped actor of `sys` (the facade serves
/// some calls on the caller's thread; this one runs where the actor runs it): its reply, or a
/// failed test and R{}.
template <class R, class Handle, class... Ts>
R ask(caf::actor_system& sys, const Handle& dest, Ts... xs) {
  using namespace std::chrono_literals;
  caf::scoped_actor self{sys};
  R out{};
  self->request(dest, 20s, xs...)
      .receive([&](R& r) { out = std::move(r); },
               [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  return out;
}

/// `c`'s jobs on its lanes once there are `n` of them, or after 10 s (so that a test whose job
/// never comes fails rather than hangs).
inline std::uint64_t await_pending_jobs(client& c, std::uint64_t n) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (c.stats().pending_jobs < n && std::chrono::steady_clock::now() < give_up) {
  }
  return c.stats().pending_jobs;
}

}  // namespace uma::test
