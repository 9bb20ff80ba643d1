// A fatal fault ends the allocator incarnation whichever path made the failing backend call
// (docs/reliability.md): the block allocator growing a slab on the caller's thread or on the
// actor's, a caller call, a refused region retried on a lane, a message's handler or lane job,
// a copy between refs and a pin tied to a stream. One supervisor lives through every path, one
// fatal fault each; its restarts are counted against the fatal faults fired.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/memory/copy.hpp>
#include <uma/messages/error_category.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include "support/reliability_fixture.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t region_bytes = std::size_t{32} << 20;  // past the block allocator's limit

/// One path to a backend call: `run` sets up what it needs, injects its faults through `inject`
/// (exactly one of them fatal) and makes the call that must fail with context_lost.
struct fatal_path {
  const char* name;
  std::function<void(client&, fault_injecting_backend&)> run;
  std::uint64_t non_fatal = 0;  ///< refusals injected before the fatal fault
  errc expected = errc::context_lost;
};

fault fatal_on(backend_op op, std::uint64_t nth = 1) {
  return {op, nth, errc::context_lost, false, true};
}

/// `r` sent as a message (no caller call, no block path on the caller's thread).
byte_ref allocate_by_message(caf::actor_system& sys, client& c, allocate_request r) {
  caf::scoped_actor self{sys};
  byte_ref out;
  caf::error failed;
  self->request(c.handle(), 20s, allocate_atom_v, std::move(r))
      .receive([&](byte_ref& ref) { out = std::move(ref); },
               [&](caf::error& e) { failed = std::move(e); });
  if (failed)
    throw to_uma_error(failed);
  return out;
}

std::vector<fatal_path> paths(caf::actor_system& sys) {
  const auto region = [](std::size_t bytes) { return allocate_request{bytes, 1, 1}; };
  return {
      {"block growth on the caller's thread",
       [](client& c, fault_injecting_backend& f) {
         f.inject(fatal_on(backend_op::allocate));
         (void)c.allocate<float>(16);
       }},
      {"labelled block growth on the caller's thread",
       [](client& c, fault_injecting_backend& f) {
         f.inject(fatal_on(backend_op::allocate));
         (void)c.allocate<float>(16, {.label = "weights"});
       }},
      {"raw block growth (the C ABI's path)",
       [](client& c, fault_injecting_backend& f) {
         (void)c.allocate<float>(1);  // the facade meets the restart: blocks() is current
         auto blocks = c.blocks();
         f.inject(fatal_on(backend_op::allocate));
         (void)blocks->allocate_raw(std::size_t{64} << 10, 0, {});  // a class with no slab yet
       }},
      {"block growth in the actor's handler",
       [&sys, region](client& c, fault_injecting_backend& f) {
         f.inject(fatal_on(backend_op::allocate));
         (void)allocate_by_message(sys, c, region(4096));
       }},
      {"region in a caller call",
       [](client& c, fault_injecting_backend& f) {
         f.inject(fatal_on(backend_op::allocate));
         (void)c.allocate<std::byte>(region_bytes);
       }},
      {"region in a caller call, retried on the lane",
       [](client& c, fault_injecting_backend& f) {
         f.inject({backend_op::allocate, 1, errc::out_of_memory});
         f.inject(fatal_on(backend_op::allocate, 2));
         (void)c.allocate<std::byte>(region_bytes);
       },
       1},
      {"region in the actor's handler",
       [&sys, region](client& c, fault_injecting_backend& f) {
         f.inject(fatal_on(backend_op::allocate));
         (void)allocate_by_message(sys, c, region(region_bytes));
       }},
      {"region in the actor's handler, retried on the lane",
       [&sys, region](client& c, fault_injecting_backend& f) {
         f.inject({backend_op::allocate, 1, errc::out_of_memory});
         f.inject(fatal_on(backend_op::allocate, 2));
         (void)allocate_by_message(sys, c, region(region_bytes));
       },
       1},
      {"a fatal out-of-memory in block growth on the caller's thread",
       [](client& c, fault_injecting_backend& f) {
         f.inject({backend_op::allocate, 1, errc::out_of_memory, false, true});
         (void)c.allocate<float>(16);
       },
       0, errc::out_of_memory},
      {"a fatal out-of-memory in the actor's handler",
       [&sys, region](client& c, fault_injecting_backend& f) {
         f.inject({backend_op::allocate, 1, errc::out_of_memory, false, true});
         (void)allocate_by_message(sys, c, region(region_bytes));
       },
       0, errc::out_of_memory},
      {"prefetch in a caller call",
       [](client& c, fault_injecting_backend& f) {
         auto ref = c.allocate<std::byte>(region_bytes);
         f.inject(fatal_on(backend_op::prefetch));
         (void)c.prefetch(ref, location::host());
       }},
      {"discard on a lane",
       [](client& c, fault_injecting_backend& f) {
         auto ref = c.allocate<std::byte>(region_bytes);
         f.inject(fatal_on(backend_op::discard));
         (void)c.discard({client::erase(ref)});
       }},
      {"attributes in a caller call",
       [](client& c, fault_injecting_backend& f) {
         auto ref = c.allocate<std::byte>(region_bytes);
         f.inject(fatal_on(backend_op::attributes));
         (void)c.attributes(ref);
       }},
      {"copy on the caller's thread",
       [](client& c, fault_injecting_backend& f) {
         auto a = c.allocate<std::byte>(4096);
         auto b = c.allocate<std::byte>(4096);
         f.inject(fatal_on(backend_op::copy));
         copy(client::erase(a), client::erase(b));
       }},
      {"a pin tied to a stream",
       [](client& c, fault_injecting_backend& f) {
         auto ref = c.allocate<std::byte>(4096);
         f.inject(fatal_on(backend_op::launch_host_func));
         ref.pin_until({});
       }},
  };
}

class fatal_paths : public test::reliability_fixture {
 protected:
  /// Waits (bounded, no sleep) until the supervisor runs `generation`.
  supervision_stats running(const allocator_supervisor_actor& sup, std::uint64_t generation) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    auto s = query_supervision(sys_, sup);
    while ((s.current_generation != generation || s.state != supervisor_state::running) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
      s = query_supervision(sys_, sup);
    }
    return s;
  }
};

TEST_F(fatal_paths, EveryFatalFaultOnEveryPathRestartsTheAllocatorOnce) {
  auto inner = std::make_shared<host_backend>();
  auto faults = std::make_shared<fault_injecting_backend>(inner);
  supervisor_config cfg;
  cfg.allocator.backend.instance = faults;
  cfg.backoff_initial = 0ms;
  cfg.max_restarts = 100;
  cfg.allocator.memory.policy = allocation_policy::pool;  // the actor's handler takes blocks too
  auto sup = spawn_supervisor(sys_, cfg);
  client c(sys_, sup);
  std::uint64_t fatal = 0;
  std::uint64_t non_fatal = 0;
  for (const auto& p : paths(sys_)) {
    try {
      p.run(c, *faults);
      ADD_FAILURE() << p.name << ": no error";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), p.expected) << p.name << ": " << e.what();
    }
    faults->clear();
    ++fatal;
    non_fatal += p.non_fatal;
    EXPECT_EQ(faults->injected(), fatal + non_fatal) << p.name << ": the fault did not fire";
    const auto s = running(sup, fatal + 1);
    ASSERT_EQ(s.current_generation, fatal + 1) << p.name << ": the incarnation went on";
    EXPECT_EQ(s.restarts, fatal) << p.name;
  }
  EXPECT_EQ(query_supervision(sys_, sup).restarts, fatal);
  std::printf("[ measure  ] %llu fatal faults on %llu paths, %llu restarts\n",
              static_cast<unsigned long long>(fatal), static_cast<unsigned long long>(fatal),
              static_cast<unsigned long long>(query_supervision(sys_, sup).restarts));
  c.stop();
  const auto counters = inner->counters();
  EXPECT_EQ(counters.frees, counters.allocations);
  EXPECT_EQ(counters.live_bytes, 0u);
}

}  // namespace
}  // namespace uma
