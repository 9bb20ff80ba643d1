// Fault matrix: a scripted request sequence is run once without faults to count the backend
// calls each step makes; then, for every backend operation and every position N of its calls,
// the script runs again with the N-th call failing (FaultInjectingBackend). Each run checks that
// exactly the step that made that call replies the injected error (a uma error naming the call),
// every other step behaves as without the fault, a refused request changed nothing, the region
// table and stats agree with the backend after every step, and nothing leaks at the end. A second
// matrix makes each failure fatal under a supervisor: the incarnation is replaced, its refs go
// inert, and again nothing leaks.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include "support/reliability_fixture.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;
using call_counts = std::array<std::uint64_t, backend_op_count>;

/// What a script step works with: the facade and the refs it holds, by slot.
struct script_env {
  client& c;
  std::size_t page;
  std::array<byte_ref, 3> slot{};

  /// The non-empty refs of `slots` (a slot stays empty when its allocation failed).
  std::vector<byte_ref> refs(std::initializer_list<std::size_t> slots) const {
    std::vector<byte_ref> out;
    for (auto i : slots)
      if (!slot[i].empty())
        out.push_back(slot[i]);
    return out;
  }
};

struct step {
  const char* name;
  std::function<void(script_env&)> run;
};

/// Touches every backend operation the allocator uses on the host: allocation with and without
/// padding, single and batch prefetch, advice on one and on several ranges (the latter reads
/// attributes first, to roll back), discard, discard+prefetch, kind_of, a reply on completion
/// (launch_host_func), releases (free) and, at stop, synchronize.
std::vector<step> script() {
  const auto when_present = [](const std::vector<byte_ref>& refs, auto&& f) {
    if (!refs.empty())
      f(refs);
  };
  return {
      {"allocate a", [](script_env& e) { e.slot[0] = e.c.allocate<std::byte>(e.page); }},
      {"allocate b", [](script_env& e) { e.slot[1] = e.c.allocate<std::byte>(3 * e.page); }},
      {"allocate c (padded)",
       [](script_env& e) {
         e.slot[2] = e.c.allocate<std::byte>(e.page, {.alignment = 2 * e.page});
       }},
      {"prefetch a",
       [=](script_env& e) {
         when_present(e.refs({0}), [&](auto r) { e.c.prefetch(r, {location::host()}); });
       }},
      {"prefetch a b c (batch)",
       [=](script_env& e) {
         when_present(e.refs({0, 1, 2}),
                      [&](auto r) { e.c.prefetch(r, {location::host_numa(0)}); });
       }},
      {"advise b read_mostly",
       [=](script_env& e) {
         when_present(e.refs({1}), [&](auto r) { e.c.advise(r, advice::set_read_mostly); });
       }},
      {"advise a b c preferred host",
       [=](script_env& e) {
         when_present(e.refs({0, 1, 2}), [&](auto r) {
           e.c.advise(r, advice::set_preferred_location, location::host());
         });
       }},
      {"attributes c",
       [](script_env& e) {
         if (!e.slot[2].empty())
           (void)e.c.attributes(e.slot[2]);
       }},
      {"discard a",
       [=](script_env& e) { when_present(e.refs({0}), [&](auto r) { e.c.discard(r); }); }},
      {"discard_prefetch b c",
       [=](script_env& e) {
         when_present(e.refs({1, 2}), [&](auto r) { e.c.discard_prefetch(r, {location::host()}); });
       }},
      {"kind_of b",
       [](script_env& e) {
         if (!e.slot[1].empty())
           (void)e.c.kind_of(e.slot[1].data());
       }},
      {"prefetch b, reply on completion",
       [=](script_env& e) {
         when_present(e.refs({1}), [&](auto r) {
           e.c.prefetch(r, {location::host()}, {}, completion::complete);
         });
       }},
      {"drop a", [](script_env& e) { e.slot[0].reset(); }},
      {"prefetch two halves of b (paired)",
       [](script_env& e) {
         if (e.slot[1].empty())
           return;
         const auto half = e.slot[1].size() / 2;
         e.c.prefetch({e.slot[1].subview(0, half), e.slot[1].subview(half, half)},
                      {location::host(), location::host_numa(0)});
       }},
      {"advise b c unset preferred",
       [=](script_env& e) {
         when_present(e.refs({1, 2}),
                      [&](auto r) { e.c.advise(r, advice::unset_preferred_location); });
       }},
      {"drop b c",
       [](script_env& e) {
         e.slot[1].reset();
         e.slot[2].reset();
       }},
  };
}

class fault_matrix : public test::reliability_fixture {
 protected:
  struct rig {
    std::shared_ptr<host_backend> inner = std::make_shared<host_backend>();
    std::shared_ptr<fault_injecting_backend> faults =
        std::make_shared<fault_injecting_backend>(inner);
  };

  [[nodiscard]] call_counts calls(const fault_injecting_backend& f) const {
    call_counts out{};
    for (std::size_t i = 0; i < backend_op_count; ++i)
      out[i] = f.calls(static_cast<backend_op>(i));
    return out;
  }

  /// The region table, the stats and the backend agree, and the table lists exactly the regions
  /// the script holds.
  void check_consistent(client& c, const script_env& e, const host_backend& inner,
                        const std::string& where) {
    const auto s = c.flush();  // releases queued so far have reached the backend
    const auto table = c.regions();
    const auto counters = inner.counters();
    EXPECT_EQ(s.live_regions, table.size()) << where;
    EXPECT_EQ(s.live_regions, counters.live_allocations) << where;
    EXPECT_EQ(s.live_bytes, counters.live_bytes) << where;
    std::set<std::uint64_t> held, listed;
    for (const auto& r : e.slot)
      if (!r.empty())
        held.insert(r.id());
    for (const auto& r : table)
      listed.insert(r.id);
    EXPECT_EQ(held, listed) << where;
  }

  static std::vector<range_attributes> attributes_of(const script_env& e, host_backend& inner) {
    std::vector<range_attributes> out;
    for (const auto& r : e.slot)
      if (!r.empty())
        out.push_back(inner.attributes(r.range()));
    return out;
  }

  /// Runs the script without faults: the backend calls counted after each step.
  std::vector<call_counts> dry_run() {
    rig r;
    client c(sys_, allocator_config{.backend = {.instance = r.faults}});
    c.set_max_block_bytes(0);  // the message path: every backend call fails
    script_env e{c, r.inner->guaranteed_alignment()};
    std::vector<call_counts> after;
    for (const auto& s : script()) {
      s.run(e);
      after.push_back(calls(*r.faults));
    }
    c.stop();
    after.push_back(calls(*r.faults));  // stop: releases and synchronize
    return after;
  }

  std::uint64_t injected_ = 0;
  std::uint64_t runs_ = 0;
};

constexpr std::array matrix_ops = {backend_op::allocate,         backend_op::free,
                                   backend_op::prefetch,         backend_op::discard,
                                   backend_op::discard_prefetch, backend_op::advise,
                                   backend_op::attributes,       backend_op::kind_of,
                                   backend_op::launch_host_func, backend_op::synchronize};

TEST_F(fault_matrix, EveryBackendCallFailingAtEveryPositionGivesAClearErrorAndLeaksNothing) {
  const auto steps = script();
  const auto dry = dry_run();
  for (const auto op : matrix_ops) {
    const auto total = dry.back()[static_cast<std::size_t>(op)];
    ASSERT_GT(total, 0u) << "the script never calls " << to_string(op);
    for (std::uint64_t n = 1; n <= total; ++n) {
      const auto where = std::string(to_string(op)) + " call #" + std::to_string(n);
      // The step that makes the n-th call; none for calls made only at stop or asynchronously.
      std::optional<std::size_t> failing;
      if (op != backend_op::free)
        for (std::size_t i = 0; i < steps.size() && !failing; ++i)
          if (dry[i][static_cast<std::size_t>(op)] >= n)
            failing = i;
      rig r;
      client c(sys_, allocator_config{.backend = {.instance = r.faults}});
      c.set_max_block_bytes(0);  // the message path: every backend call fails
      script_env e{c, r.inner->guaranteed_alignment()};
      r.faults->inject({op, n, errc::backend_error});
      for (std::size_t i = 0; i < steps.size(); ++i) {
        const auto at = where + ", step '" + steps[i].name + "'";
        const auto before = attributes_of(e, *r.inner);
        std::optional<error> failure;
        try {
          steps[i].run(e);
        } catch (const error& err) {
          failure = err;
        }
        if (failing == i) {
          ASSERT_TRUE(failure.has_value()) << at << ": the injected failure was not reported";
          EXPECT_EQ(failure->code(), errc::backend_error) << at;
          EXPECT_NE(std::string(failure->what())
                        .find("injected fault: " + std::string(to_string(op)) + " call failed"),
                    std::string::npos)
              << at << ": " << failure->what();
          EXPECT_EQ(attributes_of(e, *r.inner), before)
              << at << ": a refused request changed advice or placement";
        } else {
          EXPECT_FALSE(failure.has_value()) << at << ": " << failure->what();
        }
        check_consistent(c, e, *r.inner, at);
      }
      EXPECT_EQ(c.stats().total_failures(), failing ? 1u : 0u) << where;
      c.stop();
      const auto counters = r.inner->counters();
      EXPECT_EQ(r.faults->injected(), 1u) << where;
      EXPECT_EQ(counters.frees, counters.allocations) << where;
      EXPECT_EQ(counters.live_bytes, 0u) << where;
      EXPECT_EQ(counters.bad_frees, 0u) << where;
      injected_ += r.faults->injected();
      ++runs_;
    }
  }
  std::printf(
      "[ measure  ] %llu runs of a %zu-step script, %llu faults injected (every call of "
      "%zu backend operations)\n",
      static_cast<unsigned long long>(runs_), steps.size(),
      static_cast<unsigned long long>(injected_), matrix_ops.size());
}

TEST_F(fault_matrix, EveryFatalFailureRestartsTheAllocatorAndLeaksNothing) {
  const auto steps = script();
  const auto dry = dry_run();
  for (const auto op : matrix_ops) {
    if (op == backend_op::free || op == backend_op::synchronize)
      continue;  // never fail a request: free is noexcept, synchronize runs in post_stop
    const auto total = dry[steps.size() - 1][static_cast<std::size_t>(op)];
    for (std::uint64_t n = 1; n <= total; ++n) {
      const auto where = std::string(to_string(op)) + " call #" + std::to_string(n) + " (fatal)";
      rig r;
      supervisor_config cfg;
      cfg.allocator.backend.instance = r.faults;
      cfg.backoff_initial = 0ms;
      auto sup = spawn_supervisor(sys_, cfg);
      client c(sys_, sup);
      c.set_max_block_bytes(0);  // the message path: every backend call fails
      script_env e{c, r.inner->guaranteed_alignment()};
      r.faults->inject({op, n, errc::context_lost, false, true});
      std::optional<error> failure;
      std::size_t i = 0;
      for (; i < steps.size() && !failure; ++i) {
        try {
          steps[i].run(e);
        } catch (const error& err) {
          failure = err;
        }
      }
      ASSERT_TRUE(failure.has_value()) << where;
      EXPECT_EQ(failure->code(), errc::context_lost) << where << ": " << failure->what();
      // The supervisor replaces the incarnation (bounded wait, no sleep).
      const auto deadline = std::chrono::steady_clock::now() + 20s;
      auto s = query_supervision(sys_, sup);
      while ((s.current_generation != 2 || s.state != supervisor_state::running) &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
        s = query_supervision(sys_, sup);
      }
      ASSERT_EQ(s.current_generation, 2u) << where << ": state " << to_string(s.state);
      ASSERT_FALSE(s.generations.empty());
      EXPECT_EQ(s.generations[0].regions_leaked, 0u) << where;
      EXPECT_EQ(s.generations[0].final_stats.live_bytes, 0u) << where;
      // Generation 1's refs are inert and refused; generation 2 serves.
      for (const auto& ref : e.slot)
        if (!ref.empty()) {
          EXPECT_FALSE(ref.valid()) << where;
          UMA_EXPECT_ERRC(c.prefetch({ref}, {location::host()}), errc::allocator_stopped);
        }
      EXPECT_EQ(c.allocate<float>(16).generation(), 2u) << where;
      e.slot = {};
      c.stop();
      const auto counters = r.inner->counters();
      EXPECT_EQ(counters.frees, counters.allocations) << where;
      EXPECT_EQ(counters.live_bytes, 0u) << where;
      EXPECT_EQ(counters.bad_frees, 0u) << where;
      injected_ += r.faults->injected();
      ++runs_;
    }
  }
  std::printf("[ measure  ] %llu fatal faults injected, %llu restarts, nothing leaked\n",
              static_cast<unsigned long long>(injected_), static_cast<unsigned long long>(runs_));
}

}  // namespace
}  // namespace uma
