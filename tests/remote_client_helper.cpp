// A client process for uma_remote_tests: connects to a serving node's wire (TARGET:
// unix:PATH), opens a session, allocates REGIONS x BYTES (with "advise": prefetches them to the
// host and advises them read-mostly), prints "ready: ..." and waits to be killed (a minute at
// most). The tests kill it to show that a dead client's leases are released.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <uma/actors/remote/remote_client.hpp>

int main(int argc, char** argv) {
  if (argc != 4 && !(argc == 5 && std::string(argv[4]) == "advise")) {
    std::fprintf(stderr, "usage: %s TARGET REGIONS BYTES [advise]\n", argv[0]);
    return 2;
  }
  const auto regions = std::strtoull(argv[2], nullptr, 10);
  const auto bytes = std::strtoull(argv[3], nullptr, 10);
  try {
    uma::remote_client server(argv[1], {.timeout = std::chrono::seconds(10)});
    std::vector<uma::region_handle> held;
    for (unsigned long long i = 0; i < regions; ++i)
      held.push_back(server.allocate(bytes, "helper " + std::to_string(i)));
    if (argc == 5) {
      static_cast<void>(server.prefetch(held, {uma::location::host()}));
      static_cast<void>(server.advise(held, uma::advice::set_read_mostly));
    }
    std::printf("ready: session %llu, %llu region(s), %llu bytes\n",
                static_cast<unsigned long long>(server.session()), regions, regions * bytes);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(60));  // bounded: the test kills it first
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uma_remote_client_helper: %s\n", e.what());
    return 1;
  }
  return 0;
}
