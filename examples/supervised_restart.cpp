// supervised_restart: worker threads hold refs from a supervised allocator; an injected fault
// (a lost CUDA context, simulated on the host backend) kills the allocator; its supervisor
// restarts it. The old refs report inert, new allocations succeed in the next generation. The
// example learns of the restart by subscribing to it (no polling), and prints the final report
// that stopping the client returns.
//
//   supervised_restart [--workers N] [--backend auto|cuda|host]
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/after.hpp>
#include <caf/scoped_actor.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/client.hpp>
#include <uma/messages/register_types.hpp>
#include <uma/sys/fault_injecting_backend.hpp>

namespace {

struct config : caf::actor_system_config {
  config() { uma::register_types(*this); }
};

/// One ref per worker, each allocated and filled on a thread of its own.
std::vector<uma::ManagedRef<int>> allocate_per_worker(uma::client& uma, int workers) {
  std::vector<uma::ManagedRef<int>> held(workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w)
    threads.emplace_back([&, w] {
      held[w] = uma.allocate<int>(1024, {.label = "worker " + std::to_string(w)});
      auto pin = held[w].pin();
      for (auto& x : pin)
        x = w;
    });
  for (auto& t : threads)
    t.join();
  return held;
}

/// Waits (bounded) for the supervisor's next restart_event to `observer`, and prints it.
uma::restart_event await_restart(caf::actor_system& sys, caf::scoped_actor& observer) {
  uma::restart_event ev;
  observer->receive([&](uma::restarted_atom, uma::restart_event& e) { ev = std::move(e); },
                    caf::after(std::chrono::seconds(30)) >> [] {});
  std::printf("restart event: generation %llu -> %llu, cause %s, reason %s\n",
              static_cast<unsigned long long>(ev.generation_before),
              static_cast<unsigned long long>(ev.generation_after),
              std::string(uma::to_string(ev.cause)).c_str(), sys.render(ev.reason).c_str());
  return ev;
}

/// Stops the client and prints the final report of the post_stop that ran.
void stop_and_report(uma::client& uma) {
  const auto report = uma.stop();
  if (report)
    std::printf("final report: generation %llu, %llu region(s) freed, %llu leaked\n",
                static_cast<unsigned long long>(report->stats.generation),
                static_cast<unsigned long long>(report->stop.regions_freed),
                static_cast<unsigned long long>(report->stop.regions_leaked));
}

/// Prints the backend's allocation and free counts; true when every allocation was freed once.
bool report_frees(const uma::backend& backend) {
  const auto counters = backend.counters();
  std::printf("backend: %llu allocations, %llu frees, %llu bad frees\n",
              static_cast<unsigned long long>(counters.allocations),
              static_cast<unsigned long long>(counters.frees),
              static_cast<unsigned long long>(counters.bad_frees));
  return counters.allocations == counters.frees && counters.bad_frees == 0;
}

/// How many of `held` are inert (invalid and unpinnable); prints the count.
int count_inert(const std::vector<uma::ManagedRef<int>>& held) {
  int inert = 0;
  for (const auto& ref : held) {
    if (!ref.valid() && !ref.try_pin())
      ++inert;
  }
  std::printf("old refs inert: %d of %zu (generation 1 freed %llu region(s))\n", inert, held.size(),
              static_cast<unsigned long long>(
                  held[0].stop_info() ? held[0].stop_info()->regions_freed : 0));
  return inert;
}

int run(int workers, uma::backend_choice choice) {
  config cfg;
  caf::actor_system sys{cfg};
  auto faults = std::make_shared<uma::fault_injecting_backend>(uma::make_backend(choice));
  std::printf("backend: %s\n", faults->description().c_str());

  uma::supervisor_config sc;
  sc.allocator.backend.instance = faults;
  sc.max_restarts = 3;
  uma::client uma(sys, sc);  // spawns and owns a supervisor
  const auto supervisor = *uma.supervisor();

  // This thread observes restarts: the supervisor sends it a restart_event for each one.
  caf::scoped_actor observer{sys};
  observer
      ->request(supervisor, std::chrono::seconds(10), uma::subscribe_atom_v,
                caf::actor_cast<uma::restart_observer_actor>(observer))
      .receive([](std::uint64_t) {}, [](caf::error&) {});

  // Each worker allocates and keeps a ref of generation 1.
  std::vector<uma::ManagedRef<int>> held = allocate_per_worker(uma, workers);
  std::printf("generation 1: %d workers hold refs, live_regions=%llu\n", workers,
              static_cast<unsigned long long>(uma.stats().live_regions));

  // The next prefetch hits a lost context: the incarnation replies the error and exits.
  faults->inject({uma::backend_op::prefetch, 1, uma::errc::context_lost});
  try {
    uma.prefetch(held[0], uma::location::host());
  } catch (const uma::error& e) {
    std::printf("prefetch failed: %s: %s\n", std::string(uma::to_string(e.code())).c_str(),
                e.what());
  }

  // The supervisor restarts it and tells the observer once generation 2 serves.
  const auto ev = await_restart(sys, observer);
  const auto s = uma::query_supervision(sys, supervisor);
  std::printf("supervisor: generation %llu, %llu restart(s), last exit: %s\n",
              static_cast<unsigned long long>(s.current_generation),
              static_cast<unsigned long long>(s.restarts), s.last_exit_reason.c_str());

  const int inert = count_inert(held);

  auto fresh = uma.allocate<int>(1024, {.label = "after restart"});
  std::printf("new allocation: generation %llu, valid=%s\n",
              static_cast<unsigned long long>(fresh.generation()),
              fresh.valid() ? "true" : "false");

  const bool ok = ev.generation_after == 2 && ev.cause == uma::restart_cause::failure &&
                  s.current_generation == 2 && inert == workers && fresh.valid() &&
                  fresh.generation() == 2;
  held.clear();
  fresh.reset();
  stop_and_report(uma);
  const bool clean = report_frees(*faults);
  std::printf("%s\n",
              ok && clean ? "PASS: restarted, old refs inert, nothing freed twice" : "FAIL");
  return ok && clean ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int workers = 4;
  auto choice = uma::backend_choice::automatic;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--workers" && i + 1 < argc) {
      workers = std::atoi(argv[++i]);
    } else if (arg == "--backend" && i + 1 < argc) {
      auto c = uma::parse_backend_choice(argv[++i]);
      if (!c) {
        std::fprintf(stderr, "supervised_restart: unknown backend '%s'\n", argv[i]);
        return 2;
      }
      choice = *c;
    } else {
      std::fprintf(stderr, "usage: supervised_restart [--workers N] [--backend auto|cuda|host]\n");
      return 2;
    }
  }
  if (workers <= 0) {
    std::fprintf(stderr, "supervised_restart: --workers must be positive\n");
    return 2;
  }
  try {
    return run(workers, choice);
  } catch (const uma::error& e) {
    std::fprintf(stderr, "supervised_restart: %s: %s\n",
                 std::string(uma::to_string(e.code())).c_str(), e.what());
    return 1;
  }
}
