// A program built against an installed uma (find_package(uma); linked to uma::uma, and again to
// uma::allocator alone): allocates through the blocking client on the host backend, uses the
// memory, releases it and checks the counters.

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <iostream>
#include <numeric>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/client.hpp>
#include <uma/messages/register_types.hpp>

namespace {

struct config : caf::actor_system_config {
  config() { uma::register_types(*this); }
};

}  // namespace

int main() {
  try {
    config cfg;
    caf::actor_system sys{cfg};
    uma::client uma(sys, uma::allocator_config{.backend = {.choice = uma::backend_choice::host}});

    auto numbers = uma.allocate<int>(1000, {.label = "consumer"});
    long long sum = 0;
    {
      auto pin = numbers.pin();
      std::iota(pin.begin(), pin.end(), 1);
      sum = std::accumulate(pin.begin(), pin.end(), 0LL);
    }
    numbers.reset();
    uma.trim();  // the block went back to its cached slab: give the slab back too
    const auto stats = uma.flush();

    if (sum != 500500 || stats.allocations != 1 || stats.live_regions != 0) {
      std::cout << "FAIL: sum " << sum << ", allocations " << stats.allocations << ", live regions "
                << stats.live_regions << "\n";
      return 1;
    }
    std::cout << "OK: " UMA_CONSUMER_TARGET " from an installed package, " << stats.backend
              << " backend, sum of 1..1000 = " << sum << ", nothing left live\n";
    return 0;
  } catch (const uma::error& e) {
    std::cout << "FAIL: " << uma::to_string(e.code()) << ": " << e.what() << "\n";
    return 1;
  }
}
