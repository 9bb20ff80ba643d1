// A malicious client for tests/remote_process_test.cpp: connects to a serving node's wire
// (TARGET: unix:PATH) and misbehaves in one way, prints what happened on stdout, and exits 0
// when it could make its attempt (whatever the server did about it).
//
//   uma_remote_attacker TARGET forge SESSION_ID     another session's id with a guessed secret;
//                                                   quota, snapshot and restart as a tenant
//   uma_remote_attacker TARGET oversized N          N allocate requests of 16 MiB (F5)
//   uma_remote_attacker TARGET regions-flood L R    L leases, then R region requests from 16
//                                                   threads at once (F6); prints "flooding"
//                                                   once 100 are answered
//   uma_remote_attacker TARGET connections N [hold] N raw connections; how many the server closed
//                                                   (with hold: then keeps them until killed)
//   uma_remote_attacker TARGET half-open            raw: connect, send nothing (F7)
//   uma_remote_attacker HOST:PORT handshake-deadline N   N TCP connections that never start
//                                                   TLS; how many the server closed, and when
//   uma_remote_attacker TARGET garbage              raw: 64 KiB of bytes that are no HTTP/2
//   uma_remote_attacker TARGET idle                 raw: send nothing; report when the server
//                                                   closes the connection (30 s at most)
//   uma_remote_attacker TARGET idle-session         a session (a connection of its own) that
//                                                   sends nothing after it opened; report when
//                                                   the server ends its stream (30 s at most),
//                                                   then keeps the channel until killed
//   uma_remote_attacker HOST:PORT tls-connections N CERT KEY CA   N gRPC connections over
//                                                   mutual TLS with one certificate, one after
//                                                   the other, each making a call; how many were
//                                                   served, then keeps them until killed
//
//   uma_remote_attacker TARGET big-table SESSIONS LEASES SECONDS   SESSIONS x LEASES leases,
//                                                   then its own Regions from 8 threads
//   uma_remote_attacker TARGET calls SECONDS THREADS  honest GetStats calls, a connection per
//                                                   thread: calls a second, p50 and p99
//   uma_remote_attacker TARGET connect-flood SECONDS THREADS  raw connections made and closed
//                                                   at once, as fast as THREADS threads can
//   uma_remote_attacker TARGET frames KIND SECONDS CONNS     raw HTTP/2 floods, and messages
//   uma_remote_attacker TARGET unfinished CONNS STREAMS      left half-way (http2_attacker.cpp)
//
// `--from ADDRESS` before TARGET makes the raw TCP connections from that local address (such as
// 127.0.0.2, another address of loopback), so that a test's honest client on 127.0.0.1 is
// another address. `--tls CERT KEY CA` before TARGET makes the gRPC modes connect over mutual
// TLS with those files.
// The raw modes print "connected" or "sent" and keep the connection open until killed (at most a
// minute).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include <remote.grpc.pb.h>

namespace {

namespace w = uma::wire::v1;
using namespace std::chrono_literals;

std::string target;
std::string source_address;  // --from: the raw TCP connections' local address

std::string read_text(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Mutual TLS with the files CERT KEY CA.
std::shared_ptr<grpc::ChannelCredentials> tls_credentials(const char* cert, const char* key,
                                                          const char* ca) {
  grpc::SslCredentialsOptions tls;
  tls.pem_cert_chain = read_text(cert);
  tls.pem_private_key = read_text(key);
  tls.pem_root_certs = read_text(ca);
  return grpc::SslCredentials(tls);
}

std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();

std::unique_ptr<w::Remote::Stub> stub(int max_send = -1) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(max_send);
  return w::Remote::NewStub(grpc::CreateCustomChannel(target, credentials, args));
}

template <class Req, class Rep, class Method>
grpc::Status call(w::Remote::Stub& s, Method m, const Req& req, Rep& rep) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  return (s.*m)(&ctx, req, &rep);
}

void report(const char* what, const grpc::Status& s) {
  std::printf("%s: %s\n", what, s.ok() ? "ok" : ("refused (" + s.error_message() + ")").c_str());
}

/// An open session of this process: the stream and the key.
struct session {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<w::SessionEvent>> reader;
  w::SessionKey key;
  explicit session(w::Remote::Stub& s) {
    reader = s.OpenSession(&ctx, w::OpenSessionRequest{});
    w::SessionEvent first;
    if (!reader->Read(&first)) {
      std::printf("open_session: refused\n");
      std::exit(1);
    }
    key = first.key();
  }
  ~session() { ctx.TryCancel(); }
};

int forge(std::uint64_t victim) {
  auto s = stub();
  session mine(*s);
  w::RegionRequest rel;
  rel.mutable_session()->set_id(victim);
  rel.mutable_session()->set_secret_hi(mine.key.secret_hi());
  rel.mutable_session()->set_secret_lo(mine.key.secret_lo() ^ 1);
  rel.mutable_region()->set_id(1);
  rel.mutable_region()->set_generation(1);
  w::CountReply n;
  report("release", call(*s, &w::Remote::Stub::Release, rel, n));
  w::CloseSessionRequest close;
  *close.mutable_session() = rel.session();
  report("close_session", call(*s, &w::Remote::Stub::CloseSession, close, n));
  w::QuotaRequest quota;
  quota.set_bytes(~std::uint64_t{0});
  report("quota", call(*s, &w::Remote::Stub::Quota, quota, n));
  w::Snapshot snap;
  report("snapshot", call(*s, &w::Remote::Stub::TakeSnapshot, w::SnapshotRequest{}, snap));
  report("restart", call(*s, &w::Remote::Stub::Restart, w::RestartRequest{}, n));
  return 0;
}

int oversized(int n) {
  auto s = stub();
  session mine(*s);
  w::AllocateRequest req;
  *req.mutable_session() = mine.key;
  req.set_bytes(4096);
  req.set_attach(1);
  req.set_label(std::string(16u << 20, 'x'));
  int refused = 0;
  for (int i = 0; i < n; ++i) {
    w::RegionHandle h;
    refused += call(*s, &w::Remote::Stub::Allocate, req, h).ok() ? 0 : 1;
  }
  std::printf("oversized: %d refused\n", refused);
  return 0;
}

int regions_flood(int leases, int requests) {
  auto s = stub();
  session mine(*s);
  int held = 0;
  for (; held < leases; ++held) {
    w::AllocateRequest req;
    *req.mutable_session() = mine.key;
    req.set_bytes(1);
    req.set_attach(1);
    w::RegionHandle h;
    if (!call(*s, &w::Remote::Stub::Allocate, req, h).ok())
      break;
  }
  std::printf("leases: %d\n", held);
  std::fflush(stdout);
  std::atomic<int> next{0}, answered{0}, largest{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&] {
      while (next.fetch_add(1) < requests) {
        w::RegionsPageRequest req;
        *req.mutable_session() = mine.key;
        req.set_page_size(100000);
        w::RegionsPage page;
        const auto st = call(*s, &w::Remote::Stub::Regions, req, page);
        if (st.ok() || st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED)
          if (answered.fetch_add(1) + 1 == 100) {  // the flood is under way: a test may kill now
            std::printf("flooding\n");
            std::fflush(stdout);
          }
        int seen = largest.load();
        while (page.rows_size() > seen && !largest.compare_exchange_weak(seen, page.rows_size())) {
        }
      }
    });
  for (auto& t : threads)
    t.join();
  std::printf("largest page: %d\nregions: %d answered\n", largest.load(), answered.load());
  return 0;
}

/// SESSIONS sessions (over two connections) holding LEASES leases each, allocated from a thread
/// per session; then Regions requests of its own from 8 threads for SECONDS (issue 35, finding
/// 4: the region table amplified one tenant's load onto all). Prints "leases: N", "flooding",
/// then how many requests were answered.
int big_table(int sessions, int leases, int seconds) {
  std::vector<std::unique_ptr<w::Remote::Stub>> stubs;
  for (int i = 0; i < 2; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    stubs.push_back(w::Remote::NewStub(grpc::CreateCustomChannel(target, credentials, args)));
  }
  std::vector<std::unique_ptr<session>> open;
  for (int i = 0; i < sessions; ++i)
    open.push_back(std::make_unique<session>(*stubs[static_cast<std::size_t>(i % 2)]));
  std::atomic<int> held{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < sessions; ++i)
    threads.emplace_back([&, i] {
      auto& s = *stubs[static_cast<std::size_t>(i % 2)];
      for (int n = 0; n < leases; ++n) {
        w::AllocateRequest req;
        *req.mutable_session() = open[static_cast<std::size_t>(i)]->key;
        req.set_bytes(64);
        req.set_attach(1);
        w::RegionHandle h;
        if (!call(s, &w::Remote::Stub::Allocate, req, h).ok())
          return;
        ++held;
      }
    });
  for (auto& t : threads)
    t.join();
  threads.clear();
  std::printf("leases: %d\nflooding\n", held.load());
  std::fflush(stdout);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::atomic<int> answered{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      auto& s = *stubs[static_cast<std::size_t>(t % 2)];
      while (std::chrono::steady_clock::now() < until) {
        w::RegionsPageRequest req;
        *req.mutable_session() = open[static_cast<std::size_t>(t % sessions)]->key;
        req.set_page_size(100000);
        w::RegionsPage page;
        answered += call(s, &w::Remote::Stub::Regions, req, page).ok() ? 1 : 0;
      }
    });
  for (auto& t : threads)
    t.join();
  std::printf("regions: %d answered\n", answered.load());
  return 0;
}

}  // namespace

/// A raw connection to the target: its Unix socket, or a TCP HOST:PORT (IPv4).
int raw_connect() {
  if (!target.starts_with("unix:")) {
    const auto colon = target.rfind(':');
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(std::atoi(target.c_str() + colon + 1)));
    ::inet_pton(AF_INET, target.substr(0, colon).c_str(), &addr.sin_addr);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (!source_address.empty()) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      ::inet_pton(AF_INET, source_address.c_str(), &from.sin_addr);
      if (::bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0) {
        std::printf("cannot bind %s: %s\n", source_address.c_str(), std::strerror(errno));
        std::exit(1);
      }
    }
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      std::printf("cannot connect: %s\n", std::strerror(errno));
      std::exit(1);
    }
    return fd;
  }
  const std::string path = target.substr(5);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    std::printf("cannot connect: %s\n", std::strerror(errno));
    std::exit(1);
  }
  return fd;
}

/// Keeps this process (and its connections) until the test kills it, a minute at most.
void hold() {
  std::fflush(stdout);
  static_cast<void>(::poll(nullptr, 0, 60'000));
}

int http2_frames(const std::string& kind, int seconds, int conns);  // http2_attacker.cpp
int http2_unfinished(int conns, int streams);

namespace {

/// True when the server closed `fd` (end of file after whatever it sent, such as HTTP/2's
/// SETTINGS) within `wait`.
bool closed_within(int fd, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  char buffer[4096];
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0))) <= 0)
      return false;  // nothing more within the time: still open
    const auto n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      return true;
  }
}

int connections(int n, bool keep) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i)
    fds.push_back(raw_connect());
  // Each gets until one shared deadline to be closed: those the server refuses are closed by
  // then, the ones it keeps are still open (a poll per descriptor, no sleep).
  const auto deadline = std::chrono::steady_clock::now() + 300ms;
  int closed = 0;
  for (const int fd : fds) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    closed += closed_within(fd, std::max(left, std::chrono::milliseconds(1))) ? 1 : 0;
  }
  std::printf("closed by the server: %d\n", closed);
  if (keep)
    hold();
  return 0;
}

/// N connections with one certificate, each its own (a channel of its own subchannel pool), one
/// after the other: each makes a call with a 5 s deadline before the next connects.
int tls_connections(int n, const char* cert, const char* key, const char* ca) {
  const auto creds = tls_credentials(cert, key, ca);
  std::vector<std::unique_ptr<w::Remote::Stub>> stubs;
  int served = 0;
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    stubs.push_back(w::Remote::NewStub(grpc::CreateCustomChannel(target, creds, args)));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    w::Stats stats;
    served += stubs.back()->GetStats(&ctx, w::StatsRequest{}, &stats).ok() ? 1 : 0;
  }
  std::printf("served: %d, refused: %d\n", served, n - served);
  hold();
  return 0;
}

/// N connections that never start TLS: each must be closed by the server's handshake deadline.
int handshake_deadline(int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i)
    fds.push_back(raw_connect());
  std::printf("connected %d\n", n);
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  int closed = 0;
  for (const int fd : fds)
    closed += closed_within(fd, 15s) ? 1 : 0;
  std::printf("closed by the server: %d after %lld ms\n", closed,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         std::chrono::steady_clock::now() - start)
                                         .count()));
  return 0;
}

/// A session that makes no request: prints "session open", then how its stream ended.
int idle_session() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  auto s = w::Remote::NewStub(grpc::CreateCustomChannel(target, credentials, args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  auto reader = s->OpenSession(&ctx, w::OpenSessionRequest{});
  w::SessionEvent event;
  if (!reader->Read(&event)) {
    std::printf("open_session: refused\n");
    return 1;
  }
  std::printf("session open\n");
  std::fflush(stdout);
  while (reader->Read(&event)) {
  }
  const auto status = reader->Finish();
  std::printf("stream ended: %s\n", status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                                        ? "still open after 30 s"
                                        : status.error_message().c_str());
  hold();  // the channel stays: only the server can close the connection and free its slot
  return 0;
}

/// THREADS honest clients, a connection each, calling GetStats one call after the other for
/// SECONDS: the calls a second and the latency's median and 99th percentile (what the wire costs
/// a small call; not an attack).
int calls(int seconds, int threads) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::vector<std::vector<double>> us(static_cast<std::size_t>(threads));
  std::vector<std::thread> all;
  for (int i = 0; i < threads; ++i)
    all.emplace_back([&, i] {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
      auto s = w::Remote::NewStub(grpc::CreateCustomChannel(target, credentials, args));
      while (std::chrono::steady_clock::now() < until) {
        const auto start = std::chrono::steady_clock::now();
        w::Stats stats;
        if (!call(*s, &w::Remote::Stub::GetStats, w::StatsRequest{}, stats).ok())
          continue;
        us[static_cast<std::size_t>(i)].push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count());
      }
    });
  for (auto& t : all)
    t.join();
  std::vector<double> merged;
  for (const auto& v : us)
    merged.insert(merged.end(), v.begin(), v.end());
  std::sort(merged.begin(), merged.end());
  if (merged.empty())
    return 1;
  std::printf("calls: %zu in %d s (%.0f a second), p50 %.1f us, p99 %.1f us\n", merged.size(),
              seconds, static_cast<double>(merged.size()) / seconds, merged[merged.size() / 2],
              merged[merged.size() * 99 / 100]);
  return 0;
}

/// THREADS threads connecting and closing at once, as fast as they can, for SECONDS.
int connect_flood(int seconds, int threads) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::atomic<std::uint64_t> made{0};
  std::vector<std::thread> all;
  for (int i = 0; i < threads; ++i)
    all.emplace_back([&] {
      while (std::chrono::steady_clock::now() < until) {
        ::close(raw_connect());
        ++made;
      }
    });
  std::printf("flooding\n");
  std::fflush(stdout);
  for (auto& t : all)
    t.join();
  std::printf("connections made: %llu\n", static_cast<unsigned long long>(made.load()));
  return 0;
}

int raw(const std::string& mode) {
  const int fd = raw_connect();
  if (mode == "garbage") {
    const std::string junk(64 << 10, '\x17');
    static_cast<void>(::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL));
    std::printf("sent\n");
  } else {
    std::printf("connected\n");
  }
  std::fflush(stdout);
  if (mode == "idle") {
    const auto start = std::chrono::steady_clock::now();
    if (closed_within(fd, 30s))
      std::printf("closed by the server after %lld ms\n",
                  static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                             std::chrono::steady_clock::now() - start)
                                             .count()));
    else
      std::printf("still open after 30 s\n");
    return 0;
  }
  // Holds the connection until the server closes it or the test kills this process.
  (void)closed_within(fd, 60s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 3 && std::string(argv[1]) == "--from") {
    source_address = argv[2];
    argv += 2;
    argc -= 2;
  }
  if (argc > 5 && std::string(argv[1]) == "--tls") {
    credentials = tls_credentials(argv[2], argv[3], argv[4]);
    argv += 4;
    argc -= 4;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s [--from ADDRESS] unix:PATH|HOST:PORT MODE [ARGS]\n", argv[0]);
    return 2;
  }
  target = argv[1];
  const std::string mode = argv[2];
  const auto arg = [&](int i) { return argc > i ? std::atoi(argv[i]) : 0; };
  if (mode == "forge" && argc == 4)
    return forge(std::strtoull(argv[3], nullptr, 10));
  if (mode == "oversized")
    return oversized(arg(3));
  if (mode == "regions-flood")
    return regions_flood(arg(3), arg(4));
  if (mode == "connections")
    return connections(arg(3), argc > 4 && std::string(argv[4]) == "hold");
  if (mode == "tls-connections" && argc == 7)
    return tls_connections(arg(3), argv[4], argv[5], argv[6]);
  if (mode == "handshake-deadline")
    return handshake_deadline(arg(3));
  if (mode == "idle-session")
    return idle_session();
  if (mode == "big-table")
    return big_table(arg(3), arg(4), arg(5));
  if (mode == "calls")
    return calls(arg(3), arg(4));
  if (mode == "connect-flood")
    return connect_flood(arg(3), arg(4));
  if (mode == "frames" && argc == 6)
    return http2_frames(argv[3], arg(4), arg(5));
  if (mode == "unfinished")
    return http2_unfinished(arg(3), arg(4));
  if (mode == "half-open" || mode == "garbage" || mode == "idle")
    return raw(mode);
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
