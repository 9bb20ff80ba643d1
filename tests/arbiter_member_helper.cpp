// A member process for uma_arbiter_tests: a host-backend allocator with one emulated device of
// 8 GiB holding REGIONS planned regions of BYTES each (resident, evictable), joined to the node
// at TARGET as NAME with one claim on device 0. "honest" applies each grant to the allocator
// (client::device_budget evicts at once); "stubborn" never evicts: it reports what it holds.
// Prints "joined member ID" and then one line per grant applied:
// "grant SEQ budget BYTES shrink 0|1 revoked 0|1 resident BYTES". Then waits for SIGTERM or
// SIGKILL (a minute at most: the test ends it first, and PR_SET_PDEATHSIG if the test dies).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <pthread.h>
#include <signal.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/client.hpp>
#include <uma/actors/remote/arbiter/arbiter_member.hpp>
#include <uma/messages/register_types.hpp>

namespace {

struct config : caf::actor_system_config {
  config() { uma::register_types(*this); }
};

std::uint64_t number(const char* text) {
  return std::strtoull(text, nullptr, 10);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr,
                 "usage: %s TARGET NAME MIN WANTED PRIORITY REGIONS BYTES honest|stubborn\n",
                 argv[0]);
    return 2;
  }
  // SIGTERM is waited for below, not delivered: blocked before any thread starts.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
  const bool honest = std::string(argv[8]) == "honest";
  try {
    config cfg;
    caf::actor_system sys{cfg};
    uma::allocator_config ac;
    ac.backend.choice = uma::backend_choice::host;
    ac.backend.host_devices = {1, 8ull << 30};
    uma::client c(sys, ac);
    std::vector<uma::byte_ref> held;
    for (std::uint64_t i = 0; i < number(argv[6]); ++i) {
      held.push_back(uma::client::erase(c.allocate<std::byte>(number(argv[7]))));
      static_cast<void>(
          c.will_access({held.back()}, 0, uma::access_mode::write, uma::residency_policy::migrate));
      static_cast<void>(c.done_with({held.back()}));
    }
    auto apply = honest ? uma::apply_to(c) : uma::arbiter_apply([&c](const uma::arbiter_grant& g) {
      return static_cast<std::uint64_t>(c.residency().devices.at(g.device).resident);
    });
    auto printing = [&apply](const uma::arbiter_grant& g) {
      const auto resident = apply(g);
      std::printf("grant %llu budget %llu shrink %d revoked %d resident %llu\n",
                  static_cast<unsigned long long>(g.sequence),
                  static_cast<unsigned long long>(g.budget_bytes), g.shrink ? 1 : 0,
                  g.revoked ? 1 : 0, static_cast<unsigned long long>(resident));
      std::fflush(stdout);
      return resident;
    };
    const uma::arbiter_claim claim{
        0, number(argv[3]), number(argv[4]), static_cast<std::uint32_t>(number(argv[5])), 1, false};
    uma::arbiter_member member(argv[1], argv[2], {claim}, printing,
                               {.timeout = std::chrono::seconds(10)});
    std::printf("joined member %llu\n", static_cast<unsigned long long>(member.id()));
    std::fflush(stdout);
    const timespec bound{60, 0};
    static_cast<void>(sigtimedwait(&term, nullptr, &bound));
  } catch (const std::exception& e) {
    std::printf("refused: %s\n", e.what());
    std::fflush(stdout);
    return 1;
  }
  return 0;
}
