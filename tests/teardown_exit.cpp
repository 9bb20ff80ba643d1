// Process exit with uma still in use. Each mode leaves refs, pins or allocators alive when the
// process ends, in an order chosen by where the objects live, and ends the process; ctest
// (tests/CMakeLists.txt) runs every mode as its own process and checks the exit status, the
// verdict line and a time limit (a hang fails), and the sanitizer builds check for double frees
// and use after free on the way out.
//
//   teardown_exit MODE     MODE: well-ordered | refs-outlive-system | pin-outlives-system |
//                                unowned-allocator | supervised | exit-with-live-system |
//                                cuda-runtime-gone
//
// The actor system itself always lives in main's frame: CAF 0.17.6 (Debian) aborts when an
// actor_system is destroyed during static destruction, with or without uma ("free(): corrupted
// unsorted chunks" from a program that only defines a static actor_system), so uma cannot
// support that order; see docs/reliability.md.
//
// The last line on stderr is "teardown MODE: ok (...)" (exit 0) or "teardown MODE: FAILED (...)"
// (exit 1). Exit 77 means skipped (cuda-runtime-gone without a usable CUDA device).

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/client.hpp>
#include <uma/actors/managed_allocator.hpp>
#include <uma/messages/register_types.hpp>
#include <uma/sys/host_backend.hpp>

namespace {

struct uma_config : caf::actor_system_config {
  uma_config() { uma::register_types(*this); }
};

/// Defined first, so destroyed last: judges the backend's counters once everything else is gone.
struct last_word {
  std::string mode;
  std::shared_ptr<uma::backend> backend;
  std::uint64_t expect_leaked = 0;  ///< allocations never freed, on purpose
  bool at_most = false;             ///< frees may fall short (the allocator never stopped)

  ~last_word() {
    if (!backend)
      return;
    const auto c = backend->counters();
    const bool ok = c.bad_frees == 0 &&
                    (at_most ? c.frees <= c.allocations : c.frees + expect_leaked == c.allocations);
    std::fprintf(
        stderr, "teardown %s: %s (allocations=%llu frees=%llu bad_frees=%llu never freed=%llu)\n",
        mode.c_str(), ok ? "ok" : "FAILED", static_cast<unsigned long long>(c.allocations),
        static_cast<unsigned long long>(c.frees), static_cast<unsigned long long>(c.bad_frees),
        static_cast<unsigned long long>(c.allocations - c.frees));
    if (!ok)
      _exit(1);
  }
};

/// Frees, during static destruction, what it was given: after the CUDA runtime's own teardown.
struct late_free {
  late_free() = default;
  late_free(const late_free&) = delete;
  late_free& operator=(const late_free&) = delete;
  std::shared_ptr<uma::backend> backend;
  void* ptr = nullptr;
  std::size_t bytes = 0;
  ~late_free() {
    if (ptr)
      backend->free_managed(ptr, bytes);
  }
};

// Static objects are destroyed in reverse order of definition, after main's frame is gone.
last_word word;
late_free gpu_leftover;
std::vector<uma::ManagedRef<int>> static_refs;
std::optional<uma::Pin<int>> static_pin;

uma::allocator_config config(std::shared_ptr<uma::backend> b) {
  uma::allocator_config c;
  c.backend.instance = std::move(b);
  c.supervision.drain_timeout =
      std::chrono::milliseconds(200);  // bounds the wait for a pin held at exit
  return c;
}

/// Allocates `n` regions through `c`, writes each, and keeps a clone of each in static_refs.
std::vector<uma::ManagedRef<int>> allocate_some(uma::client& c, int n) {
  std::vector<uma::ManagedRef<int>> out;
  for (int i = 0; i < n; ++i) {
    auto ref = c.allocate<int>(1024);
    ref.pin()[0] = i;
    static_refs.push_back(ref);
    out.push_back(std::move(ref));
  }
  return out;
}

int run(const std::string& mode, caf::actor_system& sys) {
  word.mode = mode;
  auto host = std::make_shared<uma::host_backend>();
  word.backend = host;
  if (mode == "well-ordered") {
    // Everything in main's frame: refs and a pin dropped first (releases to a live allocator),
    // then the owning client stops it; static_refs is emptied so nothing outlives the system.
    uma::client owner(sys, config(host));
    auto refs = allocate_some(owner, 8);
    static_refs.clear();
    auto pin = refs.front().pin();
    refs.clear();
  } else if (mode == "refs-outlive-system") {
    // The allocator stops and the system is destroyed while static refs live: they are inert
    // and dropped after the system is gone, freeing nothing more.
    uma::client owner(sys, config(host));
    (void)allocate_some(owner, 8);
  } else if (mode == "pin-outlives-system") {
    // A pin held across the stop: post_stop waits for the drain timeout, leaks that region
    // (never freed under a reader) and frees the rest; the pin is released, and its memory
    // still read, after the system is gone.
    uma::client owner(sys, config(host));
    (void)allocate_some(owner, 4);
    static_pin.emplace(static_refs.front().pin());
    word.expect_leaked = 1;
  } else if (mode == "unowned-allocator") {
    // Nobody stops the allocator: its last handle goes away, and the actor's on_exit (run from
    // on_destroy) must free everything before the system's destructor returns.
    auto handle = uma::spawn_allocator(sys, config(host));
    uma::client c(sys, handle);
    (void)allocate_some(c, 8);
  } else if (mode == "supervised") {
    // A supervisor and its incarnation left running when main returns: its last handle goes
    // away here, without a stop.
    // (Once a use after free: on_exit ran from on_destroy and sent the incarnation a non-anonymous
    // exit while still monitoring it; fixed in actors/allocator_supervisor.cpp.)
    auto sup = uma::spawn_supervisor(sys, {.allocator = config(host)});
    uma::client c(sys, sup);
    (void)allocate_some(c, 8);
  } else if (mode == "exit-with-live-system") {
    // std::exit with the actor system, a running allocator and its owning client alive in
    // abandoned frames: static destruction drops refs and a pin while CAF's threads still run
    // (releases reach a live allocator). Nothing is stopped, so frees may fall short; nothing may
    // be freed twice, crash or hang.
    uma::client owner(sys, config(host));  // never destroyed: std::exit abandons this frame
    (void)allocate_some(owner, 8);
    static_pin.emplace(static_refs.back().pin());
    word.at_most = true;
    std::exit(0);
  } else if (mode == "cuda-runtime-gone") {
    // The CUDA runtime registers its teardown at its first call, i.e. after the globals above
    // were constructed, so it runs before gpu_leftover is destroyed: that free_managed sees
    // cudaErrorCudartUnloading (rmm#2366, cudf#16783) and must accept it without a crash or a
    // bad free.
    std::shared_ptr<uma::backend> gpu;
    try {
      gpu = uma::make_backend(uma::backend_choice::cuda);
    } catch (const uma::error& e) {
      std::fprintf(stderr, "teardown %s: skipped, no usable CUDA device (%s)\n", mode.c_str(),
                   e.what());
      word.backend = nullptr;
      return 77;
    }
    word.backend = gpu;
    uma::client owner(sys, config(gpu));
    (void)allocate_some(owner, 4);  // freed by the allocator, before exit
    gpu_leftover.backend = gpu;     // field by field: a temporary late_free would free at once
    gpu_leftover.bytes = std::size_t{1} << 20;
    gpu_leftover.ptr = gpu->allocate_managed(gpu_leftover.bytes, uma::attach_flag::global);
  } else {
    std::fprintf(stderr, "teardown_exit: unknown mode '%s'\n", mode.c_str());
    word.backend = nullptr;
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: teardown_exit MODE\n");
    return 2;
  }
  uma_config cfg;
  caf::actor_system sys{cfg};
  return run(argv[1], sys);
}
