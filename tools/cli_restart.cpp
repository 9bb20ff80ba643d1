// `uma restart --connect unix:OPERATOR-SOCKET`: a serving node's allocator restarted by its
// operator.

#include <iostream>

#include "tools/cli_commands.hpp"
#include "tools/cli_hardening.hpp"

namespace uma::cli {

int run_restart(const options& o) {
  const auto hardening = parse_hardening(o);
  remote_session session(o, hardening.tls);
  auto& server = session.server();
  const auto generation = server.restart();
  std::cout << "server " << server.address() << ": allocator restarted, generation " << generation
            << "\n";
  std::cout.flush();
  return std::cout ? exit_ok : exit_failure;
}

}  // namespace uma::cli
