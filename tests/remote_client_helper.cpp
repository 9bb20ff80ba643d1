// A client process for tests/remote_process_test.cpp: connects to a serving node, allocates
// regions there (with `advise`: prefetches them to the host and advises them read-mostly, by
// id), says so on stdout and waits (at most a minute) to be killed. Its leases must be released
// on the server when it dies.
//
//   uma_remote_client_helper HOST PORT REGIONS BYTES [advise]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>

#include <uma/actors/remote_client.hpp>
#include <uma/messages/register_types.hpp>

namespace {

struct config : caf::actor_system_config {
  config() {
    uma::register_types(*this);
    load<caf::io::middleman>();
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && !(argc == 6 && std::string(argv[5]) == "advise")) {
    std::fprintf(stderr, "usage: %s HOST PORT REGIONS BYTES [advise]\n", argv[0]);
    return 2;
  }
  const auto port = static_cast<std::uint16_t>(std::strtoul(argv[2], nullptr, 10));
  const auto regions = std::strtoull(argv[3], nullptr, 10);
  const auto bytes = std::strtoull(argv[4], nullptr, 10);
  try {
    config cfg;
    caf::actor_system sys{cfg};
    uma::remote_client server(sys, argv[1], port, std::chrono::seconds(10));
    std::vector<uma::region_handle> held;
    for (unsigned long long i = 0; i < regions; ++i)
      held.push_back(server.allocate(bytes, "helper " + std::to_string(i)));
    if (argc == 6) {
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
