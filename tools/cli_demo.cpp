// `uma demo`: the worker pipeline on the chosen backend, then a stop that leaves refs inert.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include <caf/actor_system.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/client.hpp>
#include "examples/worker_pipeline.hpp"
#include "tools/cli_commands.hpp"
#include "tools/stats_format.hpp"

namespace uma::cli {

namespace {

[[nodiscard]] std::string progress_text(const pipeline::pipeline_progress& p) {
  return "progress: " + std::to_string(p.finished) + "/" + std::to_string(p.total) +
         " batches finished, " + std::to_string(p.mismatched) + " mismatched, " +
         std::to_string(p.failed) + " failed";
}

/// Stops the allocator while a ref and its clone are held and shows that the clone went inert.
/// True when it did.
[[nodiscard]] bool stop_while_held(client& uma) {
  auto held = uma.allocate<float>(1 << 16, {.label = "held across stop"});
  {
    auto pin = held.pin();
    std::fill(pin.begin(), pin.end(), 1.0f);
  }
  auto clone = held;
  std::cout << "holding region " << held.id() << " (" << human_bytes(held.bytes())
            << ") and a clone of its ref while the allocator stops\n";
  // The report of the post_stop that ran (the clone's stop_info() tells the same).
  const auto final = uma.stop();
  const auto report = final ? std::optional(final->stop) : clone.stop_info();
  std::cout << "allocator stopped: freed " << (report ? report->regions_freed : 0) << " region(s), "
            << (report ? report->bytes_freed : 0) << " bytes, leaked "
            << (report ? report->regions_leaked : 0) << "\n";
  std::cout << "clone after stop: valid=" << (clone.valid() ? "true" : "false")
            << " data=" << static_cast<const void*>(clone.data()) << std::endl;
  return !clone.valid() && clone.data() == nullptr;
}

/// `inner` wrapped in a fault-injecting backend armed with `specs`; null when there are none.
std::shared_ptr<fault_injecting_backend> with_faults(const std::shared_ptr<backend>& inner,
                                                     const std::vector<fault>& specs) {
  if (specs.empty())
    return nullptr;
  auto faults = std::make_shared<fault_injecting_backend>(inner);
  for (const auto& f : specs)
    faults->inject(f);
  return faults;
}

/// Waits until a restart the injected faults caused (if any) has finished: a request that
/// reached the supervisor before it learned of the crash is answered allocator_stopped by the
/// dying incarnation; one that arrives during the restart waits for the next incarnation.
void await_restart(client& uma) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    try {
      static_cast<void>(uma.stats());
      return;
    } catch (const error& e) {
      if (e.code() != errc::allocator_stopped)
        return;
    }
  }
}

/// "supervisor: generation 2, 1 restart(s), state running, ...".
void print_supervision(const supervision_stats& sv, const fault_injecting_backend* faults) {
  std::cout << "supervisor: generation " << sv.current_generation << ", " << sv.restarts
            << " restart(s), state " << to_string(sv.state);
  if (faults)
    std::cout << ", " << faults->injected() << " fault(s) injected";
  if (!sv.last_exit_reason.empty())
    std::cout << ", last exit: " << sv.last_exit_reason;
  std::cout << "\n";
}

}  // namespace

int run_demo(const options& o) {
  std::shared_ptr<backend> backend = make_backend(o.backend, o.host_devices);
  const auto faults = with_faults(backend, o.faults);
  if (faults)
    backend = faults;
  std::cout << "backend: " << to_string(backend->kind()) << " (" << backend->description() << ")\n";
  const pipeline::pipeline_options shape{
      .producers = o.producers, .consumers = o.consumers, .batches = o.batches, .floats = o.floats};
  std::cout << "pipeline: " << pipeline::describe(shape) << std::endl;

  actor_config cfg;
  configure(cfg, o);

  configure(cfg, o);
  caf::actor_system sys{cfg};
  supervisor_config supervision;
  supervision.allocator.backend.instance = backend;
  supervision.backoff_initial = std::chrono::milliseconds(1);
  client uma(sys, supervision);  // spawns the supervisor, stops it at the latest on return
  const auto supervisor = *uma.supervisor();

  // On a terminal the progress line rewrites itself; in a log only its final state is written.
  const bool terminal = isatty(fileno(stdout)) != 0;
  const auto result = pipeline::run_pipeline(
      sys, uma.handle(), shape, [terminal](const pipeline::pipeline_progress& p) {
        if (terminal) {
          std::cout << "\r" << progress_text(p) << std::flush;
        } else if (p.finished == p.total) {
          std::cout << progress_text(p) << "\n";
        }
      });
  if (terminal)
    std::cout << "\n";
  std::cout << "pipeline: " << pipeline::summarize(result);
  std::cout << "stats after the pipeline:\n" << to_string(result.stats);

  if (faults)
    await_restart(uma);
  const auto sv = query_supervision(sys, supervisor);
  print_supervision(sv, faults.get());
  if (sv.state != supervisor_state::running) {
    std::cerr << "uma demo: the allocator is " << to_string(sv.state) << "; nothing more to show\n";
    return exit_failure;
  }
  const bool inert = stop_while_held(uma);
  if (faults) {
    // Failed batches are the point of injecting faults; leaks and hangs are not.
    return inert && result.stats.live_regions == 0 ? exit_ok : exit_failure;
  }
  if (!result.ok()) {
    std::cerr << "uma demo: the pipeline failed (see above)\n";
    return exit_failure;
  }
  return inert ? exit_ok : exit_failure;
}

}  // namespace uma::cli
