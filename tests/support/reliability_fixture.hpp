#pragma once

#include <memory>

#include <gtest/gtest.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <uma/actors/client.hpp>
#include <uma/messages/register_types.hpp>
#include <uma/sys/host_backend.hpp>
#include "actor_fixture.hpp"

#if defined(__SANITIZE_THREAD__)
#define UMA_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UMA_TEST_TSAN 1
#endif
#endif

namespace uma::test {

/// actor_fixture for the reliability suites (tests/stress_test.cpp, ...), with one difference
/// under ThreadSanitizer: CAF runs its actors on one scheduler thread with the work-sharing
/// policy. Debian's libcaf_core is not built with TSan, so TSan cannot see the atomics with
/// which CAF's work-stealing scheduler hands an actor from one worker thread to another, and
/// would report every actor's own state as racing with itself. The sharing policy hands jobs
/// over through a mutex (which TSan does see), and a single worker keeps each actor on one
/// thread; uma's own cross-thread synchronization — refs, pins, releases and post_stop between
/// user threads, the actor and its worker — stays fully checked. (What is left, CAF's lock-free
/// mailbox, is covered by tests/tsan.supp.)
struct reliability_config : uma_config {
  reliability_config() {
#ifdef UMA_TEST_TSAN
    set("scheduler.policy", caf::atom("sharing"));
    set("scheduler.max-threads", 1);
#endif
  }
};

using reliability_fixture = basic_actor_fixture<reliability_config>;

}  // namespace uma::test
