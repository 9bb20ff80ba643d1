// A malicious peer for tests/remote_process_test.cpp: connects to a serving node on 127.0.0.1
// and misbehaves in one way, prints what happened on stdout (one line per attempt), and exits 0
// when it could make its attempt (whatever the server did about it).
//
//   uma_remote_attacker HOST PORT forge SESSION_ID   use another session's id with own secret
//   uma_remote_attacker HOST PORT exit               exit messages (kill) to the gateway
//   uma_remote_attacker HOST PORT link               link to the gateway, then die (kill)
//   uma_remote_attacker HOST PORT self-peer          open a session naming the gateway itself
//   uma_remote_attacker HOST PORT huge-header        raw TCP: one BASP header announcing 1 GiB
//   uma_remote_attacker HOST PORT garbage            raw TCP: 64 KiB of bytes that are no BASP
//   uma_remote_attacker HOST PORT idle               raw TCP: send nothing; report when the
//                                                    server closes the connection (30 s at most)
//
// The raw TCP modes print "sent" and keep the connection open until killed (at most a minute).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/remote_client.hpp>
#include <uma/messages/register_types.hpp>

namespace {

using namespace std::chrono_literals;

struct config : caf::actor_system_config {
  config() {
    uma::register_types(*this);
    load<caf::io::middleman>();
  }
};

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

/// Runs one request and prints "ok" or the error's text.
template <class R, class... Ts>
void attempt(caf::scoped_actor& self, const uma::remote_allocator_actor& gw, const char* what,
             Ts&&... xs) {
  self->request(gw, 10s, std::forward<Ts>(xs)...)
      .receive([&](R&) { say(std::string(what) + ": ok"); },
               [&](caf::error& e) {
                 say(std::string(what) + ": refused: " + self->system().render(e));
               });
}

int forge(uma::remote_client& own, std::uint64_t victim) {
  caf::scoped_actor self{own.gateway().home_system()};
  const uma::session_key forged{victim, own.key().secret_hi, own.key().secret_lo};
  const uma::region_handle first{1, 1};
  attempt<std::uint64_t>(self, own.gateway(), "release", uma::release_atom_v, forged, first);
  attempt<uma::remote_op_result>(self, own.gateway(), "discard", uma::discard_atom_v, forged,
                                 uma::remote_discard_request{{first}});
  attempt<std::uint64_t>(self, own.gateway(), "close_session", uma::close_session_atom_v, forged);
  attempt<std::uint64_t>(self, own.gateway(), "quota", uma::quota_atom_v, std::uint64_t{1});
  return 0;
}

int exit_and_link(caf::actor_system& sys, uma::remote_client& own, bool link) {
  const auto gw = caf::actor_cast<caf::actor>(own.gateway());
  caf::scoped_actor self{sys};
  if (!link) {
    caf::anon_send_exit(gw, caf::exit_reason::kill);
    self->send_exit(gw, caf::exit_reason::kill);
    self->send_exit(gw, caf::exit_reason::user_shutdown);
    say("exit: sent");
  } else {
    // The gateway goes in as a spawn argument: CAF 0.17 dereferences a null argument tuple when
    // a function actor is spawned with none (UBSan stops on it).
    auto linked = sys.spawn(
        [](caf::event_based_actor* linker, const caf::actor& target) -> caf::behavior {
          linker->link_to(target);
          linker->quit(caf::exit_reason::kill);
          return {};
        },
        gw);
    self->wait_for(linked);  // its exit to the gateway is queued on the connection now
    say("link: linked and died");
  }
  // One round trip after them, instead of a sleep: the connection delivers in order, so once the
  // gateway answers, the exits have reached it (the server must survive both).
  self->request(own.gateway(), 10s, uma::stats_atom_v)
      .receive([](uma::remote_stats&) {}, [](caf::error&) {});
  return 0;
}

/// Waits (at most 30 s) for the server to close `fd`, reading and discarding what it sends.
void await_close(int fd) {
  timeval limit{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  const auto start = std::chrono::steady_clock::now();
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  say(n == 0 || errno == ECONNRESET
          ? "closed by the server after " + std::to_string(ms.count()) + " ms"
          : "still open after " + std::to_string(ms.count()) + " ms");
}

int raw(const char* host, std::uint16_t port, const std::string& mode) {
  const bool huge = mode == "huge-header";
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (fd < 0 || inet_pton(AF_INET, host, &addr.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    say("cannot connect");
    return 1;
  }
  if (mode == "idle") {
    say("connected");
    await_close(fd);
    ::close(fd);
    return 0;
  }
  std::vector<unsigned char> bytes;
  if (huge) {
    // A BASP header (32 bytes): operation client_handshake, payload_len 1 GiB (big endian).
    bytes.assign(32, 0);
    bytes[0] = 0x01;
    const std::uint32_t len = 1u << 30;
    bytes[4] = static_cast<unsigned char>(len >> 24);
    bytes[5] = static_cast<unsigned char>(len >> 16);
    bytes[6] = static_cast<unsigned char>(len >> 8);
    bytes[7] = static_cast<unsigned char>(len);
  } else {
    bytes.resize(64 << 10);
    for (std::size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<unsigned char>((i * 2654435761u) >> 13);
  }
  const auto sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  say(sent > 0 ? "sent" : "send failed");
  await_close(fd);  // holds the connection until the server drops it (bounded: 30 s)
  ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s HOST PORT MODE [ARG]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[3];
  const auto port = static_cast<std::uint16_t>(std::strtoul(argv[2], nullptr, 10));
  if (mode == "huge-header" || mode == "garbage" || mode == "idle")
    return raw(argv[1], port, mode);
  try {
    config cfg;
    caf::actor_system sys{cfg};
    uma::remote_client own(sys, argv[1], port, 10s);
    if (mode == "forge" && argc == 5)
      return forge(own, std::strtoull(argv[4], nullptr, 10));
    if (mode == "exit" || mode == "link")
      return exit_and_link(sys, own, mode == "link");
    if (mode == "self-peer") {
      caf::scoped_actor self{sys};
      attempt<uma::session_key>(self, own.gateway(), "self-peer", uma::open_session_atom_v,
                                caf::actor_cast<caf::actor>(own.gateway()));
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uma_remote_attacker: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "uma_remote_attacker: unknown mode %s\n", mode.c_str());
  return 2;
}
