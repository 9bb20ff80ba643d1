// uma_history_bench: what the event history (memory/event_history.hpp) costs on the allocate
// path. One run, one backend: allocate-and-release pairs through the facade on a pool
// allocator (the fastest path, so the history's share is the largest) with the history on
// (4096 slots, the default) and off (0), in alternating rounds so that drift hits both alike;
// then record() alone. Prints medians and the ratio; docs/performance.md quotes it.
//
//   uma_history_bench [--rounds N] [--pairs N]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/client.hpp>
#include <uma/memory/event_history.hpp>
#include <uma/messages/register_types.hpp>
#include <uma/sys/host_backend.hpp>

namespace {

using clock_type = std::chrono::steady_clock;

struct bench_config : caf::actor_system_config {
  bench_config() { uma::register_types(*this); }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// Nanoseconds per allocate-and-release pair, over `pairs` pairs.
double round_ns(uma::client& c, int pairs) {
  const auto start = clock_type::now();
  for (int i = 0; i < pairs; ++i)
    static_cast<void>(c.allocate<std::byte>(4096, {.label = "bench"}));
  const auto ns = std::chrono::duration<double, std::nano>(clock_type::now() - start).count();
  return ns / pairs;
}

/// Nanoseconds per record() into a full ring of the default size.
double record_ns() {
  uma::event_history h(4096);
  constexpr int n = 1'000'000;
  const auto start = clock_type::now();
  for (int i = 0; i < n; ++i)
    h.record(uma::event_kind::allocate, 1, static_cast<std::uint64_t>(i), 4096, "bench");
  return std::chrono::duration<double, std::nano>(clock_type::now() - start).count() / n;
}

int arg(int argc, char** argv, std::string_view name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name)
      return std::max(1, std::atoi(argv[i + 1]));
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = arg(argc, argv, "--rounds", 21);
  const int pairs = arg(argc, argv, "--pairs", 2000);
  bench_config cfg;
  caf::actor_system sys{cfg};
  auto backend = std::make_shared<uma::host_backend>();
  const auto make = [&](std::size_t history) {
    return uma::allocator_config{.backend = {.instance = backend},
                                 .memory = {.policy = uma::allocation_policy::pool},
                                 .supervision = {.event_history = history}};
  };
  uma::client on(sys, make(4096));
  on.set_max_block_bytes(0);  // the history is recorded on the message path
  uma::client off(sys, make(0));
  off.set_max_block_bytes(0);              // the history is recorded on the message path
  static_cast<void>(round_ns(on, pairs));  // warm-up: pool slabs, caches
  static_cast<void>(round_ns(off, pairs));
  std::vector<double> with, without;
  for (int r = 0; r < rounds; ++r) {
    with.push_back(round_ns(on, pairs));
    without.push_back(round_ns(off, pairs));
  }
  const double a = median(with), b = median(without);
  std::printf("allocate+release pair (pool, facade, %d rounds x %d pairs, medians)\n", rounds,
              pairs);
  std::printf("  history on (4096): %8.0f ns\n  history off (0):   %8.0f ns\n", a, b);
  std::printf("  ratio on/off: %.4f (%+.2f%%)\n", a / b, (a / b - 1.0) * 100.0);
  std::printf("event_history::record alone: %.1f ns\n", record_ns());
  return 0;
}
