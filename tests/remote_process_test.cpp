// The remote interface across processes, over the gRPC wire on a Unix socket (and TCP with
// mutual TLS). Either this test process serves (a supervisor, a gateway and a wire server on a
// socket of a private directory) and children connect to it, or a child `uma serve` serves and
// this process connects. Children are bounded (`--for`, a helper that exits after a minute) and
// always killed and reaped (test::child_process).

#include <gtest/gtest.h>

#include <cstdlib>

#include <dirent.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <boost/json/parse.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/client.hpp>
#include <uma/actors/metrics/prometheus_text.hpp>
#include <uma/actors/remote/remote_client.hpp>
#include <uma/actors/remote/remote_gateway.hpp>
#include <uma/actors/remote/wire/wire_server.hpp>
#include <uma/messages/register_types.hpp>
#include <uma/sys/host_backend.hpp>
#include "support/actor_fixture.hpp"
#include "support/child_process.hpp"
#include "support/gateway_request.hpp"
#include "support/http_client.hpp"
#include "tools/stats_format.hpp"

namespace uma {
namespace {

/// The programs the tests start: where the build put them, unless UMA_TEST_CLI /
/// UMA_TEST_HELPER say otherwise (a bundle on the GPU machine keeps them elsewhere).
std::string tool_path(const char* env, const char* built) {
  const char* v = std::getenv(env);
  return v != nullptr && *v != '\0' ? v : built;
}
std::string cli_path() {
  return tool_path("UMA_TEST_CLI", UMA_CLI_PATH);
}
std::string helper_path() {
  return tool_path("UMA_TEST_HELPER", UMA_REMOTE_HELPER_PATH);
}
std::string attacker_path() {
  return tool_path("UMA_TEST_ATTACKER", UMA_REMOTE_ATTACKER_PATH);
}

using namespace std::chrono_literals;
using test::child_process;

struct remote_config : caf::actor_system_config {
  remote_config() { register_types(*this); }
};

class two_processes : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/uma-remote-test-XXXXXX";
    const char* made = ::mkdtemp(tmpl);
    ASSERT_NE(made, nullptr);
    dir_ = made;
  }

  void TearDown() override {
    server_.reset();
    wire_.reset();  // session streams end before the gateway does
    local_.reset();
    if (gw_)
      caf::anon_send_exit(gw_, caf::exit_reason::user_shutdown);
    if (sup_)
      caf::anon_send_exit(sup_, caf::exit_reason::user_shutdown);
    if (!dir_.empty())
      std::filesystem::remove_all(dir_);
  }

  // -- this process serves ---------------------------------------------------------------------

  /// The backend the servers use: host, or what UMA_TEST_BACKEND names (the GPU machine runs
  /// these tests with UMA_TEST_BACKEND=cuda).
  static std::string backend_name() {
    const char* env = std::getenv("UMA_TEST_BACKEND");
    return env != nullptr && *env != '\0' ? env : "host";
  }

  /// A supervised allocator, its gateway and a wire server on this test's sockets.
  void serve_here(wire_limits limits = {}) {
    supervisor_config cfg;
    const auto choice = parse_backend_choice(backend_name());
    cfg.allocator.backend.instance =
        choice ? make_backend(*choice) : std::shared_ptr<backend>(std::make_shared<host_backend>());
    cfg.allocator.memory.quota_bytes = 1ull << 30;
    sup_ = spawn_supervisor(sys_, std::move(cfg));
    gw_ = spawn_remote_gateway(sys_, sup_, {.operator_secret = operator_});
    wire_ = std::make_unique<wire_server>(sys_, gw_,
                                          wire_server_config{.socket_path = socket(),
                                                             .operator_socket_path = op_socket(),
                                                             .operator_secret = operator_,
                                                             .limits = limits});
    local_ = std::make_unique<client>(sys_, sup_);
  }

  /// One request to the local gateway, without the wire.
  template <class R, class... Ts>
  R ask_gateway(Ts&&... xs) {
    return test::request_gateway<R>(sys_, gw_, std::forward<Ts>(xs)...);
  }

  // -- a child serves --------------------------------------------------------------------------

  /// The shell command that bounds the server's memory. `ulimit -v` where it works; under
  /// AddressSanitizer (which reserves terabytes of shadow address space, so any `ulimit -v` keeps
  /// it from starting) ASan's own limits instead: no single allocation above half the bound and
  /// no more resident memory than the bound, either of which kills the server (and fails the
  /// test) just as an allocation failure under `ulimit -v` would.
  static std::string memory_limit_prefix(std::uint64_t kib) {
    // The CUDA runtime reserves address space for the device and managed memory far beyond any
    // such bound (cudaGetDeviceCount fails with cudaErrorMemoryAllocation under `ulimit -v
    // 2000000`): there the test checks the server's peak resident memory instead
    // (peak_rss_kib, after the attack).
    if (backend_name() == "cuda")
      return "true";
#if defined(__SANITIZE_ADDRESS__)
    const auto mb = std::to_string(kib / 1024);
    const auto half = std::to_string(kib / 2048);
    return "export ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}max_allocation_size_mb=" + half +
           ":hard_rss_limit_mb=" + mb + "\"";
#else
    return "ulimit -v " + std::to_string(kib);
#endif
  }

  /// The serving child's peak resident memory (VmHWM of /proc/PID/status), in KiB; 0 if unread.
  [[nodiscard]] std::uint64_t peak_rss_kib() const {
    std::ifstream status("/proc/" + std::to_string(server_->pid()) + "/status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("VmHWM:", 0) == 0)
        return std::stoull(line.substr(6));
    return 0;
  }

  /// Starts `uma serve` on this test's sockets and reads its announcements; with
  /// `memory_limit_kib`, under `ulimit -v` of that many KiB. With `tcp`, the extra arguments
  /// include --port and the TCP port is read from the third line. With `log_too`, its stderr
  /// (the log: sessions, refusals, reloads) comes on the same pipe as its stdout.
  void serve_in_child(std::vector<std::string> extra = {}, std::uint64_t memory_limit_kib = 0,
                      bool tcp = false, bool log_too = false) {
    std::vector<std::string> argv{cli_path(), "serve", "--socket",  socket(),
                                  "--for",    "60",    "--backend", backend_name()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    if (memory_limit_kib != 0 || log_too)
      argv.insert(argv.begin(),
                  {"/bin/sh", "-c",
                   (memory_limit_kib != 0 ? memory_limit_prefix(memory_limit_kib) + " && " : "") +
                       "exec \"$0\" \"$@\"" + (log_too ? " 2>&1" : "")});
    server_ = std::make_unique<child_process>(argv);
    const auto line = server_->read_line(20s);
    ASSERT_TRUE(line) << "uma serve printed no line";
    ASSERT_EQ(line->rfind("uma serve: listening on " + endpoint() + " (backend ", 0), 0u) << *line;
    const auto op = server_->read_line(20s);
    ASSERT_TRUE(op);
    ASSERT_EQ(*op, "uma serve: operator socket " + op_endpoint());
    if (!tcp)
      return;
    const auto tcp_line = server_->read_line(20s);
    ASSERT_TRUE(tcp_line);
    const std::string prefix = "uma serve: listening on 127.0.0.1:";
    ASSERT_EQ(tcp_line->rfind(prefix, 0), 0u) << *tcp_line;
    port_ = static_cast<std::uint16_t>(std::stoul(tcp_line->substr(prefix.size())));
  }

  /// The next line of the serving child's output that starts with `prefix` (others skipped);
  /// empty when none comes within 20 s.
  std::string await_server_line(const std::string& prefix) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      const auto line = server_->read_line(std::max(left, std::chrono::milliseconds(1)));
      if (line && line->rfind(prefix, 0) == 0)
        return *line;
    }
    return {};
  }

  /// `uma serve` over TCP with mutual TLS (below, after the test certificates).
  std::string serve_tls_in_child();

  std::unique_ptr<remote_client> connect(std::chrono::milliseconds timeout = 10s) {
    return std::make_unique<remote_client>(endpoint(), remote_client_options{.timeout = timeout});
  }
  std::unique_ptr<remote_client> connect_operator() {
    return std::make_unique<remote_client>(op_endpoint(), remote_client_options{.timeout = 10s});
  }

  [[nodiscard]] std::string socket() const {
    return dir_ + "/uma.sock";
  }
  [[nodiscard]] std::string op_socket() const {
    return dir_ + "/uma.sock.operator";
  }
  [[nodiscard]] std::string endpoint() const {
    return "unix:" + socket();
  }
  [[nodiscard]] std::string op_endpoint() const {
    return "unix:" + op_socket();
  }

  /// Runs `uma ARGS...` to completion (bounded) and returns its stdout; expects exit status 0.
  std::string run_cli(std::vector<std::string> args) {
    args.insert(args.begin(), cli_path());
    child_process cli(args);
    auto out = cli.read_all(20s);
    const auto status = cli.wait(20s);
    EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << out;
    return out;
  }

  /// Runs `uma ARGS...` to completion (bounded); its exit status (-1 when it did not exit) and
  /// what it wrote to stdout and stderr.
  std::pair<int, std::string> run_cli_status(std::vector<std::string> args) {
    args.insert(args.begin(), {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", cli_path()});
    child_process cli(args);
    auto out = cli.read_all(20s);
    const auto status = cli.wait(20s);
    return {status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1, out};
  }

  /// A file of the test's private directory.
  std::string private_file(const std::string& name) {
    return dir_ + "/" + name;
  }

  /// Starts the helper client: it allocates `regions` x `bytes` (and with `advise` prefetches
  /// them to the host and advises them read-mostly), prints a ready line and waits to be killed.
  std::unique_ptr<child_process> start_helper(int regions, std::uint64_t bytes,
                                              bool advise = false) {
    std::vector<std::string> argv{helper_path(), endpoint(), std::to_string(regions),
                                  std::to_string(bytes)};
    if (advise)
      argv.emplace_back("advise");
    auto helper = std::make_unique<child_process>(argv);
    const auto ready = helper->read_line(20s);
    EXPECT_TRUE(ready && ready->rfind("ready:", 0) == 0) << (ready ? *ready : "no line");
    return helper;
  }

  /// Polls `live()` (bounded) until it returns `bytes`; returns what it saw last.
  template <class Live>
  std::uint64_t await_live_bytes(std::uint64_t bytes, Live live) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    auto seen = live();
    while (seen != bytes && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
      seen = live();
    }
    return seen;
  }

  std::string dir_;
  operator_key operator_ = make_operator_key();
  remote_config cfg_;
  caf::actor_system sys_{cfg_};
  std::uint16_t port_ = 0;
  allocator_supervisor_actor sup_;
  remote_allocator_actor gw_;
  std::unique_ptr<client> local_;
  std::unique_ptr<wire_server> wire_;
  std::unique_ptr<child_process> server_;  // killed and reaped before the actor system goes
};

// -- this process serves -------------------------------------------------------------------------

TEST_F(two_processes, StatsReadByAnotherProcessMatchTheServersOwn) {
  serve_here();
  auto ref = local_->allocate<float>(1024, {.label = "local"});
  local_->prefetch(ref, location::host());
  const auto own = local_->flush();
  EXPECT_EQ(run_cli({"stats", "--connect", endpoint(), "--json"}), cli::to_json(own));
  EXPECT_EQ(run_cli({"stats", "--connect", endpoint(), "--prometheus"}), to_prometheus(own));
}

TEST_F(two_processes, TheOperatorsSnapshotOfATablePastTheMessageCapArrivesWhole) {
  // Issue 35, finding 4: with 65,536 leases the operator's snapshot failed ("Sent message larger
  // than max (20060315 vs. 4194304)"): it was one message. 24,576 regions with labels of about
  // 195 bytes: their labels alone are past the 4 MiB cap.
  serve_here();
  std::vector<ManagedRef<float>> held;
  for (int i = 0; i < 24'576; ++i)
    held.push_back(
        local_->allocate<float>(1, {.label = std::string(190, 'l') + std::to_string(i)}));
  auto op = connect_operator();
  const auto snap = op->snapshot();
  // Every labelled allocation is there (small ones share slabs, which are regions too).
  EXPECT_EQ(std::ranges::count_if(snap.regions,
                                  [](const auto& r) { return r.info.label.starts_with("lll"); }),
            24'576);
  std::size_t label_bytes = 0;
  for (const auto& r : snap.regions)
    label_bytes += r.info.label.size();
  EXPECT_GT(label_bytes, std::size_t{4} << 20);
  EXPECT_EQ(snap.generation, 1u);
  EXPECT_FALSE(snap.events.empty());
}

TEST_F(two_processes, PrefetchAndAdviceByIdFromAnotherProcessChangeTheAttributesSeenHere) {
  serve_here();
  const auto before = local_->flush();
  auto helper = start_helper(2, 65536, true);
  const auto after = local_->flush();
  EXPECT_EQ(after.prefetches, before.prefetches + 2);
  EXPECT_EQ(after.advises, before.advises + 2);
  EXPECT_EQ(after.live_bytes, before.live_bytes + 2 * 65536);
  const auto rows = ask_gateway<remote_region_page>(regions_atom_v, operator_, region_page{}).rows;
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows) {
    EXPECT_NE(r.session, 0u);
    EXPECT_EQ(r.region.bytes, 65536u);
    ASSERT_TRUE(r.attributes_known);
    const auto attrs = to_local(r.attributes);
    EXPECT_TRUE(attrs.read_mostly);
    EXPECT_EQ(attrs.last_prefetch_location, location::host());
  }
}

TEST_F(two_processes, AKilledClientProcessHasItsLeasesReleased) {
  serve_here();
  const auto baseline = local_->flush().live_bytes;
  auto helper = start_helper(4, 1 << 20);
  EXPECT_EQ(local_->flush().live_bytes, baseline + 4 * (1 << 20));
  helper->signal(SIGKILL);
  ASSERT_TRUE(helper->wait(10s));
  EXPECT_EQ(await_live_bytes(baseline, [&] { return local_->flush().live_bytes; }), baseline);
  const auto s = ask_gateway<remote_stats>(stats_atom_v);
  EXPECT_EQ(s.sessions_lost, 1u);
  EXPECT_EQ(s.leases, 0u);
}

// -- malicious peers (docs/distributed.md, "Who may do what") -------------------------------------

/// Runs the attacker against `target` in `mode` to completion (bounded) and returns its stdout.
std::string attack(const std::string& target, std::vector<std::string> mode) {
  std::vector<std::string> argv{attacker_path(), target};
  argv.insert(argv.end(), mode.begin(), mode.end());
  child_process attacker(argv);
  auto out = attacker.read_all(30s);
  const auto status = attacker.wait(30s);
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << out;
  return out;
}

TEST_F(two_processes, MaliciousPeersLeaveAnHonestSessionIntact) {
  serve_in_child();
  auto honest = connect();
  const auto h = honest->allocate(1 << 16, "honest");
  static_cast<void>(honest->advise({h}, advice::set_read_mostly));
  const auto before = honest->stats();
  // Another process (same uid, another connection) names the honest session's id with a guessed
  // secret, asks to lift the quota, for a snapshot and a restart (F8: operator only).
  const auto forged = attack(endpoint(), {"forge", std::to_string(honest->session())});
  EXPECT_EQ(forged.find(": ok"), std::string::npos) << forged;
  EXPECT_NE(forged.find("release: refused"), std::string::npos) << forged;
  EXPECT_NE(forged.find("close_session: refused"), std::string::npos) << forged;
  EXPECT_NE(forged.find("quota: refused"), std::string::npos) << forged;
  EXPECT_NE(forged.find("snapshot: refused"), std::string::npos) << forged;
  EXPECT_NE(forged.find("restart: refused"), std::string::npos) << forged;
  // The server still serves, and the honest session, its lease and its advice are intact.
  ASSERT_FALSE(server_->wait(0ms)) << "uma serve exited";
  EXPECT_TRUE(honest->attributes(h).read_mostly);
  EXPECT_EQ(honest->prefetch({h}, {location::host()}).bytes, std::uint64_t{1} << 16);
  const auto after = honest->stats();
  EXPECT_EQ(after.allocator.live_bytes, before.allocator.live_bytes);
  EXPECT_EQ(after.allocator.quota_bytes, before.allocator.quota_bytes);
  EXPECT_EQ(after.allocator.generation, 1u);
  EXPECT_EQ(after.leases, 1u);
  EXPECT_EQ(honest->release(h), std::uint64_t{1} << 16);
}

/// Starts the attacker in a raw-socket `mode` and waits for its first line ("sent",
/// "connected ...").
std::unique_ptr<child_process> start_raw_attacker(const std::string& target,
                                                  const std::string& mode) {
  auto a = std::make_unique<child_process>(std::vector<std::string>{attacker_path(), target, mode});
  const auto line = a->read_line(20s);
  EXPECT_TRUE(line && (line->rfind("sent", 0) == 0 || line->rfind("connected", 0) == 0))
      << (line ? *line : "no line");
  return a;
}

/// The honest client's p99 over 200 calls.
double honest_p99(remote_client& honest, region_handle h) {
  std::vector<double> ms;
  for (int i = 0; i < 200; ++i) {
    const auto start = std::chrono::steady_clock::now();
    static_cast<void>(honest.attributes(h));
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("honest client: p50 %.2f ms, p99 %.2f ms\n", ms[ms.size() / 2],
              ms[ms.size() * 99 / 100]);
  return ms[ms.size() * 99 / 100];
}

TEST_F(two_processes, OversizedMessagesHalfOpenConnectionsAndGarbageLeaveAnHonestClientServed) {
  serve_in_child({}, 2'000'000);  // F5 and F7 under 2 GB of address space
  auto honest = connect();
  const auto h = honest->allocate(1 << 16, "honest");
  std::vector<std::unique_ptr<child_process>> attackers;
  for (int i = 0; i < 8; ++i)
    attackers.push_back(start_raw_attacker(endpoint(), "half-open"));
  attackers.push_back(start_raw_attacker(endpoint(), "garbage"));
  // 130 requests of 16 MiB each, over one connection: every one refused by the message cap
  // before it is buffered whole (F5).
  const auto big = attack(endpoint(), {"oversized", "130"});
  EXPECT_NE(big.find("oversized: 130 refused"), std::string::npos) << big;
  EXPECT_LT(honest_p99(*honest, h), 50.0);
  ASSERT_FALSE(server_->wait(0ms)) << "uma serve died";
  if (backend_name() == "cuda") {  // no `ulimit -v` there: the same bound on what it touched
    const auto peak = peak_rss_kib();
    EXPECT_GT(peak, 0u);
    EXPECT_LT(peak, 2'000'000u) << "uma serve's peak resident memory, KiB";
  }
  EXPECT_EQ(honest->stats().leases, 1u);
  EXPECT_EQ(honest->release(h), std::uint64_t{1} << 16);
}

/// The bound on an honest client's p99 while a flood runs (issue 35): 50 ms, as measured on the
/// release build (CI runs it too). The ASan/UBSan build is a Debug build whose server runs
/// several times slower, beside another test on two cores: there the same test bounds it at
/// 250 ms, which still fails the floods of issue 35 (p99 of seconds).
#if defined(__SANITIZE_ADDRESS__)
constexpr double flood_p99_bound_ms = 250.0;
#else
constexpr double flood_p99_bound_ms = 50.0;
#endif

/// The serving child's resident memory now (VmRSS), in KiB.
std::uint64_t rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stoull(line.substr(6));
  return 0;
}

/// The number after `label` in `text` (-1 when `label` is not there).
long long number_after(const std::string& text, const std::string& label) {
  const auto at = text.find(label);
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + label.size()));
}

TEST_F(two_processes, HttpTwoFloodsCloseTheFloodingConnectionsWhileAnHonestSessionIsServed) {
  // Issue 35, finding 2: rapid reset took the server from 21 to 981 MiB, PING floods aborted it;
  // nothing limited PINGs, resets or new streams per connection.
  serve_in_child({"--metrics", "127.0.0.1:0"}, 2'000'000);
  const auto line = server_->read_line(20s);
  ASSERT_TRUE(line);
  const std::string prefix = "uma serve: metrics on http://127.0.0.1:";
  ASSERT_EQ(line->rfind(prefix, 0), 0u) << *line;
  const auto port = static_cast<std::uint16_t>(std::stoul(line->substr(prefix.size())));
  auto honest = connect();
  const auto h = honest->allocate(1 << 16, "honest");
  const auto session = honest->session();
  [[maybe_unused]] const auto before = rss_kib(server_->pid());  // not read under ASan
  for (const std::string kind : {"ping", "settings", "reset", "priority", "empty-data"}) {
    child_process flood({attacker_path(), endpoint(), "frames", kind, "3", "4"});
    const auto started = flood.read_line(20s);
    ASSERT_TRUE(started && *started == "flooding") << kind;
    EXPECT_LT(honest_p99(*honest, h), flood_p99_bound_ms) << "while flooding " << kind;
    const auto out = flood.read_all(30s);
    ASSERT_TRUE(flood.wait(30s));
    // Each of the 4 connections is closed at its bound, and so is every one it makes again.
    EXPECT_GE(number_after(out, "connections closed by the server: "), 4) << kind << ": " << out;
  }
  ASSERT_FALSE(server_->wait(0ms)) << "uma serve died";
#if !defined(__SANITIZE_ADDRESS__)  // ASan's quarantine holds freed memory on purpose
  EXPECT_LT(peak_rss_kib(), before + 256 * 1024) << "KiB; " << before << " KiB before the floods";
#endif
  const auto metrics = test::http_get(port, "/metrics").body;
  for (const std::string reason : {"pings", "settings", "resets", "empty_frames"})
    EXPECT_GT(
        number_after(metrics, "uma_wire_connections_closed_total{reason=\"" + reason + "\"} "), 0)
        << reason << "\n"
        << metrics;
  EXPECT_EQ(honest->session(), session);
  EXPECT_EQ(honest->stats().leases, 1u);
  EXPECT_EQ(honest->release(h), std::uint64_t{1} << 16);
}

TEST_F(two_processes, MessagesLeftHalfWayCloseTheirOwnConnectionsNotAnotherSession) {
  // Issue 35, finding 1: 8 connections each sending 16 messages of 4 MiB and stopping half-way
  // put gRPC's one resource quota under pressure, and it cancelled another connection's session
  // stream: the honest session ended and its lease was released.
  serve_in_child({}, 0, false, true);
  auto honest = connect();
  const auto h = honest->allocate(1 << 16, "honest");
  const auto session = honest->session();
  [[maybe_unused]] const auto before = rss_kib(server_->pid());  // not read under ASan
  child_process attacker({attacker_path(), endpoint(), "unfinished", "8", "16"});
  EXPECT_LT(honest_p99(*honest, h), flood_p99_bound_ms);  // while the attacker sends
  const auto out = attacker.read_line(40s);
  ASSERT_TRUE(out) << "the attacker said nothing";
  // Every attacking connection was closed when it held more than its share, and paid for it.
  EXPECT_EQ(number_after(*out, "connections closed by the server: "), 8) << *out;
  EXPECT_NE(await_server_line("uma serve: closed a connection of uid "), "");
#if !defined(__SANITIZE_ADDRESS__)  // ASan's quarantine holds freed memory on purpose
  EXPECT_LT(peak_rss_kib(), before + 256 * 1024) << "KiB; " << before << " KiB before the attack";
#endif
  EXPECT_EQ(honest->session(), session);
  EXPECT_EQ(honest->stats().leases, 1u);
  EXPECT_EQ(honest->release(h), std::uint64_t{1} << 16);
}

TEST_F(two_processes, AConnectFloodOfAnotherUidLeavesThisUidsNewConnectionsServed) {
  // Issue 35, finding 5: a connect flood failed a third of other uids' new connections.
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to run the flooding attacker as another uid (setpriv)";
  std::filesystem::permissions(dir_, std::filesystem::perms::owner_all |
                                         std::filesystem::perms::group_read |
                                         std::filesystem::perms::group_exec);
  serve_in_child({"--socket-mode", "0660"});
  // The attacker is uid 65534 in this uid's group (the socket's mode lets the group connect).
  child_process flood({"/usr/bin/setpriv", "--reuid=65534",
                       "--regid=" + std::to_string(::getegid()), "--clear-groups", attacker_path(),
                       endpoint(), "connect-flood", "8", "8"});
  const auto started = flood.read_line(20s);
  ASSERT_TRUE(started && *started == "flooding") << (started ? *started : "no line");
  int served = 0;
  for (int i = 0; i < 20; ++i) {  // each `uma stats --connect` is a new connection of this uid
    const auto [code, out] = run_cli_status({"stats", "--connect", endpoint()});
    served += code == 0 ? 1 : 0;
  }
  EXPECT_EQ(served, 20);
  const auto made = flood.read_all(30s);
  ASSERT_TRUE(flood.wait(30s));
  EXPECT_GT(number_after(made, "connections made: "), 100) << made;  // the flood did flood
  EXPECT_FALSE(server_->wait(0ms)) << "uma serve died";
}

TEST_F(two_processes, ConnectionsPastTheCapPerUidAreRefusedAndTheRegionsFloodIsPagedAndCapped) {
  serve_in_child();
  auto honest = connect();
  const auto h = honest->allocate(4096, "honest");
  // F6: 1024 leases, then 300 region requests from 16 threads at once: every reply is one
  // bounded page, requests past the in-flight cap are refused, and the server stays up.
  const auto flood = attack(endpoint(), {"regions-flood", "1024", "300"});
  EXPECT_NE(flood.find("leases: 1024"), std::string::npos) << flood;
  EXPECT_NE(flood.find("largest page: 256"), std::string::npos) << flood;
  EXPECT_NE(flood.find("regions: 300 answered"), std::string::npos) << flood;
  EXPECT_LT(honest_p99(*honest, h), 50.0);
  // F7 on the socket: 16 connections per uid; the 17th is closed at once.
  const auto conns = attack(endpoint(), {"connections", "20"});
  // The honest client holds one of the uid's 16: at most 15 of the 20 stay open.
  const auto closed_at = conns.find("closed by the server: ");
  ASSERT_NE(closed_at, std::string::npos) << conns;
  EXPECT_GE(std::stoi(conns.substr(closed_at + 22)), 5) << conns;
  EXPECT_EQ(honest->stats().leases, 1u);
  ASSERT_FALSE(server_->wait(0ms)) << "uma serve died";
  EXPECT_EQ(honest->release(h), 4096u);
}

TEST_F(two_processes, AHugeRegionTableOfOneTenantLeavesAnotherTenantsCallsFast) {
  // Issue 35, finding 4: with 65,536 leases, 36 Regions calls a second gave an honest tenant a
  // p99 of 2,245 ms: each page copied the whole report, each Allocate and GetStats summed every
  // lease. 16 sessions of 4,096 leases (the cap per session), then the attacker's own Regions
  // from 8 threads back to back (the finding's load was 36 a second).
  serve_in_child({"--quota", "17179869184"});
  auto honest = connect();
  const auto h = honest->allocate(1 << 16, "honest");
  child_process attacker({attacker_path(), endpoint(), "big-table", "16", "4096", "6"});
  const auto leases = attacker.read_line(120s);
  ASSERT_TRUE(leases);
  EXPECT_EQ(*leases, "leases: 65536");
  const auto flooding = attacker.read_line(20s);
  ASSERT_TRUE(flooding && *flooding == "flooding");
  EXPECT_LT(honest_p99(*honest, h), flood_p99_bound_ms);
  std::vector<double> ms;  // the calls that summed every lease or copied the whole report
  for (int i = 0; i < 50; ++i) {
    const auto start = std::chrono::steady_clock::now();
    static_cast<void>(honest->stats());
    EXPECT_EQ(honest->regions().size(), 1u);
    const auto more = honest->allocate(4096, "more");
    EXPECT_EQ(honest->release(more), 4096u);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  EXPECT_LT(ms[49], 4 * flood_p99_bound_ms)
      << "stats + regions + allocate + release, the slowest of 50";
  const auto answered = attacker.read_all(60s);
  ASSERT_TRUE(attacker.wait(30s));
  EXPECT_GT(number_after(answered, "regions: "), 0) << answered;
  EXPECT_EQ(honest->release(h), std::uint64_t{1} << 16);
}

TEST_F(two_processes, TenantConnectionsAtTheCapLeaveTheOperatorSocketItsOwn) {
  serve_in_child();
  // Issue 35, finding 5: in the default 0600 mode the operator and the tenants are one uid, and
  // the uid's 16 connections on the tenants' socket refused the operator too.
  auto holder = std::make_unique<child_process>(
      std::vector<std::string>{attacker_path(), endpoint(), "connections", "16", "hold"});
  const auto line = holder->read_line(20s);
  ASSERT_TRUE(line) << "the attacker said nothing";
  EXPECT_EQ(*line, "closed by the server: 0");  // all 16 kept: the uid's cap is full
  const auto [code, out] = run_cli_status({"stats", "--connect", op_endpoint()});
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("generation"), std::string::npos) << out;
  const auto [tenant_code, tenant_out] = run_cli_status({"stats", "--connect", endpoint()});
  EXPECT_NE(tenant_code, 0) << tenant_out;  // the tenants' socket is still capped
}

TEST_F(two_processes, AnIdleSessionsStreamEndsSoItsConnectionAndSlotGo) {
  // Issue 35, finding 5: a session ended as idle kept its stream, so its connection was never
  // idle for gRPC and held one of the uid's connection slots for good.
  serve_in_child({"--idle-timeout", "1", "--max-connections-per-identity", "2"});
  auto active = connect(2s);  // one connection (this process's channels share it)
  const auto lease = active->allocate(4096, "active");
  auto idle = std::make_unique<child_process>(
      std::vector<std::string>{attacker_path(), endpoint(), "idle-session"});
  const auto opened = idle->read_line(20s);
  ASSERT_TRUE(opened && *opened == "session open") << (opened ? *opened : "no line");
  // The uid's two slots are taken: a raw connection is closed at accept.
  EXPECT_EQ(attack(endpoint(), {"connections", "1"}), "closed by the server: 1\n");
  // The active session's requests sweep the idle one once it has been idle for a second; its
  // stream must end then.
  std::optional<std::string> ended;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!ended && std::chrono::steady_clock::now() < deadline) {
    static_cast<void>(active->attributes(lease));
    ended = idle->read_line(100ms);
  }
  ASSERT_TRUE(ended) << "the idle session's stream is still open";
  EXPECT_EQ(*ended, "stream ended: the session ended: idle");
  // With no call left its connection is idle, gRPC closes it, and the slot is free again.
  std::string probe;
  while (std::chrono::steady_clock::now() < deadline + 10s) {
    probe = attack(endpoint(), {"connections", "1"});
    if (probe == "closed by the server: 0\n")
      break;
    static_cast<void>(active->attributes(lease));
  }
  EXPECT_EQ(probe, "closed by the server: 0\n");
  EXPECT_EQ(active->stats().sessions, 1u);
}

TEST_F(two_processes, AnIdleConnectionIsClosedAfterTheIdleTimeout) {
  serve_in_child({"--idle-timeout", "1"});
  auto idle = start_raw_attacker(endpoint(), "idle");
  const auto verdict = idle->read_line(20s);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->rfind("closed by the server after", 0), 0u) << *verdict;
}

/// The TCP ports `pid` listens on (its sockets in LISTEN state in /proc/net/tcp and tcp6).
std::set<unsigned> listening_ports(pid_t pid) {
  std::set<std::string> inodes;
  const auto fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& e : std::filesystem::directory_iterator(fd_dir)) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0)
      inodes.insert(target.substr(8, target.size() - 9));
  }
  std::set<unsigned> ports;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream row(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      row >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (state == "0A" && inodes.contains(inode))
        ports.insert(std::stoul(local.substr(local.find(':') + 1), nullptr, 16));
    }
  }
  return ports;
}

TEST_F(two_processes, TheMetricsEndpointServesNoSnapshot) {
  serve_in_child({"--metrics", "127.0.0.1:0"});
  const auto line = server_->read_line(20s);
  ASSERT_TRUE(line);
  const std::string prefix = "uma serve: metrics on http://127.0.0.1:";
  ASSERT_EQ(line->rfind(prefix, 0), 0u) << *line;
  const auto port = static_cast<std::uint16_t>(std::stoul(line->substr(prefix.size())));
  auto c = connect();
  static_cast<void>(c->allocate(4096, "tenant secret"));
  // F8: every tenant's labels and history are the operator's, through the operator socket.
  const auto snap = test::http_get(port, "/snapshot");
  EXPECT_EQ(snap.status, 404);
  EXPECT_EQ(snap.body.find("tenant secret"), std::string::npos);
  EXPECT_EQ(test::http_get(port, "/metrics").status, 200);
}

TEST_F(two_processes, UmaServeListensOnNoTcpPortUnlessTold) {
  serve_in_child();
  auto c = connect();  // it serves
  EXPECT_EQ(listening_ports(server_->pid()), std::set<unsigned>{})
      << "BASP or any other TCP listener is open by default";
}

// -- TLS ----------------------------------------------------------------------------------------

/// Makes a throw-away CA with a server certificate (for 127.0.0.1), two tenants' ("client",
/// "tenant") and the operator's client certificates, and a second CA with a rogue certificate
/// and a second server certificate, in `dir` (openssl CLI, RSA 2048, valid one day).
void make_test_certificates(const std::string& dir) {
  const std::string script =
      "set -e; cd '" + dir +
      "'; q() { \"$@\" >/dev/null 2>&1; }; printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' "
      ">san.ext; "
      "for ca in ca rogueca; do q openssl req -x509 -newkey rsa:2048 -nodes -keyout $ca.key "
      "-out $ca.pem -days 1 -subj \"/CN=uma test $ca\"; done; "
      "for n in server:ca client:ca tenant:ca operator:ca rogue:rogueca server2:rogueca; do "
      "c=${n%:*}; ca=${n#*:}; "
      "q openssl req -newkey rsa:2048 -nodes -keyout $c.key -out $c.csr -subj \"/CN=uma $c\"; "
      "q openssl x509 -req -in $c.csr -CA $ca.pem -CAkey $ca.key -CAcreateserial -out $c.pem "
      "-days 1 -extfile san.ext; done; echo made";
  child_process make({"/bin/sh", "-c", script});
  const auto out = make.read_all(60s);
  ASSERT_EQ(out, "made\n") << "openssl failed";
}

TEST_F(two_processes, TlsRoundTripWorksAndPeersWithoutAValidCertificateAreRefused) {
  make_test_certificates(dir_);
  serve_in_child(
      {"--port", "0", "--tls-cert", dir_ + "/server.pem", "--tls-key", dir_ + "/server.key",
       "--tls-ca", dir_ + "/ca.pem", "--operator-cn", "uma operator"},
      0, true);
  const auto tcp = "127.0.0.1:" + std::to_string(port_);
  const auto with = [&](const std::string& who) {
    return remote_client_options{
        .timeout = 10s,
        .tls = {dir_ + "/" + who + ".pem", dir_ + "/" + who + ".key", dir_ + "/ca.pem"}};
  };
  {
    remote_client c(tcp, with("client"));
    // 3 MiB in one message cross uma's TLS front over several rounds (it moves at most 1 MiB
    // each way per connection and round) and reach the gateway's checks whole.
    UMA_EXPECT_ERROR(static_cast<void>(c.allocate(4096, std::string(3u << 20, 'x'))),
                     errc::invalid_argument, "label");
    const auto h = c.allocate(1 << 16, "over tls");
    static_cast<void>(c.advise({h}, advice::set_read_mostly));
    EXPECT_TRUE(c.attributes(h).read_mostly);
    EXPECT_EQ(c.stats().leases, 1u);
    // The tenant's certificate is no operator's (F8); the operator's is.
    UMA_EXPECT_ERROR(static_cast<void>(c.snapshot()), errc::invalid_argument, "operator");
    remote_client op(tcp, with("operator"));
    EXPECT_EQ(op.snapshot().regions.size(), 1u);
    EXPECT_EQ(c.release(h), std::uint64_t{1} << 16);
  }
  // A certificate of another CA, and no TLS at all: refused in the handshake.
  for (const auto& tls : std::vector<std::vector<std::string>>{
           {"--tls-cert", dir_ + "/rogue.pem", "--tls-key", dir_ + "/rogue.key", "--tls-ca",
            dir_ + "/rogueca.pem"},
           {}}) {
    std::vector<std::string> argv{cli_path(), "stats", "--connect", tcp};
    argv.insert(argv.end(), tls.begin(), tls.end());
    child_process cli(argv);
    const auto out = cli.read_all(20s);
    const auto status = cli.wait(20s);
    ASSERT_TRUE(status);
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << out;
    EXPECT_EQ(out.find("sessions:"), std::string::npos) << out;
  }
  // F7 over TCP: 32 connections that never start TLS (from 127.0.0.2, the cap per address),
  // while a client with a certificate is served; the handshake deadline (5 s) closes every one.
  child_process half_open(
      {attacker_path(), "--from", "127.0.0.2", tcp, "handshake-deadline", "32"});
  const auto connected = half_open.read_line(20s);
  ASSERT_TRUE(connected && *connected == "connected 32") << (connected ? *connected : "no line");
  {
    remote_client c(tcp, with("client"));
    const auto h = c.allocate(4096, "during the attack");
    EXPECT_LT(honest_p99(c, h), 50.0);
  }
  const auto verdict = half_open.read_line(30s);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->rfind("closed by the server: 32 after", 0), 0u) << *verdict;
  EXPECT_EQ(listening_ports(server_->pid()), std::set<unsigned>{port_});
  EXPECT_FALSE(server_->wait(0ms)) << "uma serve died";
}

/// Client options with `who`'s certificate trusting `ca` (files of the test's directory).
remote_client_options tls_client(const std::string& dir, const std::string& who,
                                 const std::string& ca = "ca") {
  return {.timeout = 10s,
          .tls = {dir + "/" + who + ".pem", dir + "/" + who + ".key", dir + "/" + ca + ".pem"}};
}

/// Makes the test certificates and starts `uma serve` over TCP with the server's (and the
/// first CA); returns its address.
std::string two_processes::serve_tls_in_child() {
  make_test_certificates(dir_);
  serve_in_child({"--port", "0", "--tls-cert", dir_ + "/server.pem", "--tls-key",
                  dir_ + "/server.key", "--tls-ca", dir_ + "/ca.pem"},
                 0, true);
  return "127.0.0.1:" + std::to_string(port_);
}

TEST_F(two_processes, TcpConnectionsPastTheCapPerCertificateOrPerAddressAreRefused) {
  const auto tcp = serve_tls_in_child();
  // 17 connections with one certificate, each making a call: the 17th is closed when its
  // handshake ends (16 per identity by default).
  child_process same_cert({attacker_path(), tcp, "tls-connections", "17", dir_ + "/client.pem",
                           dir_ + "/client.key", dir_ + "/ca.pem"});
  const auto identity = same_cert.read_line(60s);
  ASSERT_TRUE(identity);
  EXPECT_EQ(*identity, "served: 16, refused: 1");
  // 40 raw connections from 127.0.0.2: the 33rd on are closed at accept (32 per address).
  child_process same_address(
      {attacker_path(), "--from", "127.0.0.2", tcp, "connections", "40", "hold"});
  const auto address = same_address.read_line(20s);
  ASSERT_TRUE(address);
  EXPECT_EQ(*address, "closed by the server: 8");
  {  // Both attackers hold their connections: another certificate is served all the same.
    remote_client honest(tcp, tls_client(dir_, "tenant"));
    const auto h = honest.allocate(4096, "during the attacks");
    EXPECT_LT(honest_p99(honest, h), 50.0);
    EXPECT_EQ(honest.release(h), 4096u);
  }
  // Connections that end give their slot back: the certificate is served again.
  same_cert.signal(SIGKILL);
  ASSERT_TRUE(same_cert.wait(10s));
  remote_client again(tcp, tls_client(dir_, "client"));
  EXPECT_EQ(again.release(again.allocate(4096, "after the attack")), 4096u);
  EXPECT_FALSE(server_->wait(0ms)) << "uma serve died";
}

TEST_F(two_processes, SilentConnectionsCannotKeepTlsClientsOfTheirAddressOut) {
  // Issue 35, finding 5: any local user without a certificate filled the 32 TCP slots of
  // 127.0.0.1 with silent connections, and no new local TLS client connected (0 of 8).
  const auto tcp = serve_tls_in_child();
  child_process silent({attacker_path(), tcp, "connections", "40", "hold"});
  const auto line = silent.read_line(20s);
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "closed by the server: 8");  // the 8 oldest made room for the newest
  // 8 TLS clients from the same address, each a connection of its own, one after the other.
  child_process honest({attacker_path(), tcp, "tls-connections", "8", dir_ + "/tenant.pem",
                        dir_ + "/tenant.key", dir_ + "/ca.pem"});
  const auto served = honest.read_line(60s);
  ASSERT_TRUE(served);
  EXPECT_EQ(*served, "served: 8, refused: 0");
  EXPECT_FALSE(server_->wait(0ms)) << "uma serve died";
}

TEST_F(two_processes, SighupReloadsCheckedTlsFilesForNewConnectionsAndKeepsThemOnABadSet) {
  make_test_certificates(dir_);
  const auto live = [&](const std::string& name) { return dir_ + "/live-" + name; };
  const auto install = [&](const std::string& cert, const std::string& key, const std::string& ca) {
    for (const auto& [from, to] : {std::pair{cert, "cert.pem"}, {key, "key.pem"}, {ca, "ca.pem"}})
      std::filesystem::copy_file(dir_ + "/" + from, live(to),
                                 std::filesystem::copy_options::overwrite_existing);
  };
  install("server.pem", "server.key", "ca.pem");  // set A: the first CA
  serve_in_child({"--port", "0", "--tls-cert", live("cert.pem"), "--tls-key", live("key.pem"),
                  "--tls-ca", live("ca.pem")},
                 0, true, true);
  const auto tcp = "127.0.0.1:" + std::to_string(port_);
  remote_client before(tcp, tls_client(dir_, "client"));
  const auto h = before.allocate(4096, "before the reload");
  // The line the server logs for a SIGHUP (read from its output, bounded).
  const auto hang_up = [&] {
    server_->signal(SIGHUP);
    return await_server_line("uma serve: SIGHUP: ");
  };
  // Set B: a server certificate of the second CA, and that CA for clients.
  install("server2.pem", "server2.key", "rogueca.pem");
  const auto reloaded = hang_up();
  EXPECT_NE(reloaded.find("reloaded the TLS files"), std::string::npos) << reloaded;
  {
    remote_client after(tcp, tls_client(dir_, "rogue", "rogueca"));
    EXPECT_EQ(after.release(after.allocate(4096, "after the reload")), 4096u);
  }
  UMA_EXPECT_ERROR(remote_client(tcp, tls_client(dir_, "client")), errc::backend_error,
                   "cannot reach the uma server");
  EXPECT_EQ(before.release(h), 4096u);  // the connection opened under A goes on
  // A garbage certificate, then a key of another certificate: refused, B stays in force.
  std::ofstream(live("cert.pem"), std::ios::trunc) << "not a certificate\n";
  const auto garbage = hang_up();
  EXPECT_NE(garbage.find("refused to reload the TLS files: --tls-cert " + live("cert.pem") +
                         ": no PEM certificate there; the previous ones stay in force"),
            std::string::npos)
      << garbage;
  install("server2.pem", "server.key", "rogueca.pem");
  const auto mismatched = hang_up();
  EXPECT_NE(mismatched.find("refused to reload the TLS files: --tls-key " + live("key.pem") +
                            " is not the key of --tls-cert"),
            std::string::npos)
      << mismatched;
  remote_client still(tcp, tls_client(dir_, "rogue", "rogueca"));
  EXPECT_EQ(still.release(still.allocate(4096, "after the refusals")), 4096u);
  EXPECT_FALSE(server_->wait(0ms)) << "uma serve died";
}

TEST_F(two_processes, ATlsClientKilledWhileRepliesAreInFlightLeavesTheServerServing) {
  const auto tcp = serve_tls_in_child();
  // Killed mid-flood, the client's connection resets while replies are still being written to
  // it: the TLS front's write fails (EPIPE), and must not end the process (SIGPIPE). Three
  // times: whether a write comes after the reset depends on the timing of each.
  for (int round = 0; round < 3; ++round) {
    child_process flood({attacker_path(), "--tls", dir_ + "/client.pem", dir_ + "/client.key",
                         dir_ + "/ca.pem", tcp, "regions-flood", "256", "1000000"});
    const auto leases = flood.read_line(20s);
    ASSERT_TRUE(leases && *leases == "leases: 256") << (leases ? *leases : "no line");
    const auto flooding = flood.read_line(20s);
    ASSERT_TRUE(flooding && *flooding == "flooding") << (flooding ? *flooding : "no line");
    flood.signal(SIGKILL);
    ASSERT_TRUE(flood.wait(10s));
  }
  remote_client after(tcp, tls_client(dir_, "tenant"));
  EXPECT_EQ(after.release(after.allocate(4096, "after the kill")), 4096u);
  EXPECT_FALSE(server_->wait(0ms)) << "uma serve died";
}

/// Writes a self-signed certificate (a CA's) that expired yesterday to `path`.
void write_expired_certificate(const std::string& path) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  ASSERT_TRUE(key != nullptr && cert != nullptr);
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -2 * 86400);
  X509_gmtime_adj(X509_getm_notAfter(cert), -86400);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("uma expired ca"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509_set_pubkey(cert, key);
  ASSERT_GT(X509_sign(cert, key, EVP_sha256()), 0);
  FILE* out = std::fopen(path.c_str(), "w");
  ASSERT_NE(out, nullptr);
  PEM_write_X509(out, cert);
  std::fclose(out);
  X509_free(cert);
  EVP_PKEY_free(key);
}

TEST_F(two_processes, GarbageOrMismatchedTlsFilesAreRefusedAtStart) {
  make_test_certificates(dir_);
  std::ofstream(dir_ + "/garbage.pem") << "not a certificate\n";
  ASSERT_EQ(::mkfifo((dir_ + "/fifo.key").c_str(), 0600), 0);
  write_expired_certificate(dir_ + "/expired-ca.pem");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{dir_ + "/garbage.pem", dir_ + "/server.key", dir_ + "/ca.pem"},
       "--tls-cert " + dir_ + "/garbage.pem: no PEM certificate there"},
      {{dir_ + "/server.pem", dir_ + "/client.key", dir_ + "/ca.pem"},
       "--tls-key " + dir_ + "/client.key is not the key of --tls-cert"},
      {{dir_ + "/server.pem", dir_ + "/server.key", dir_ + "/none.pem"},
       "--tls-ca " + dir_ + "/none.pem: cannot be read"},
      // Issue 35: a FIFO blocked the start (and SIGTERM), an expired CA was taken silently.
      {{dir_ + "/server.pem", dir_ + "/fifo.key", dir_ + "/ca.pem"},
       "--tls-key " + dir_ + "/fifo.key: not a regular file"},
      {{dir_ + "/server.pem", dir_ + "/server.key", dir_ + "/expired-ca.pem"},
       "--tls-ca " + dir_ + "/expired-ca.pem: expired"}};
  for (const auto& [files, why] : cases) {
    const auto [code, out] =
        run_cli_status({"serve", "--socket", socket(), "--for", "5", "--port", "0", "--tls-cert",
                        files[0], "--tls-key", files[1], "--tls-ca", files[2]});
    EXPECT_EQ(code, 1) << out;
    EXPECT_NE(out.find(why), std::string::npos) << out;
    EXPECT_EQ(out.find("listening"), std::string::npos) << out;
  }
  const auto [code, out] = run_cli_status({"serve", "--socket", socket(), "--port", "0"});
  EXPECT_EQ(code, 2) << out;  // a usage error, refused before anything starts (issue 36)
  EXPECT_NE(out.find("--port listens on TCP, which uma serve does only with mutual TLS"),
            std::string::npos)
      << out;
}

// -- a child `uma serve` serves ------------------------------------------------------------------

TEST_F(two_processes, ARemoteClientAllocatesPrefetchesAndAdvisesById) {
  serve_in_child();
  auto c = connect();
  const auto h = c->allocate(1 << 16, "weights");
  EXPECT_EQ(h, (region_handle{1, 1}));
  EXPECT_EQ(c->prefetch({h}, {location::host()}).bytes, std::uint64_t{1} << 16);
  static_cast<void>(c->advise({h}, advice::set_read_mostly));
  const auto attrs = c->attributes(h);
  EXPECT_TRUE(attrs.read_mostly);
  EXPECT_EQ(attrs.last_prefetch_location, location::host());
  const auto s = c->stats();
  EXPECT_EQ(s.allocator.live_regions, 1u);
  EXPECT_EQ(s.leases, 1u);
  EXPECT_EQ(s.leased_bytes, std::uint64_t{1} << 16);
  // A third process sees the same through `uma regions`.
  const auto json = run_cli({"regions", "--connect", op_endpoint(), "--json"});
  EXPECT_NE(json.find("\"label\": \"weights\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"read_mostly\": true"), std::string::npos) << json;
  EXPECT_NE(json.find("\"last_prefetch_location\": \"host\""), std::string::npos) << json;
  EXPECT_EQ(c->release(h), std::uint64_t{1} << 16);
  EXPECT_EQ(await_live_bytes(0, [&] { return c->stats().allocator.live_bytes; }), 0u);
}

TEST_F(two_processes, EveryCallAfterCloseFailsWithoutReachingTheServer) {
  serve_in_child();
  auto c = connect();
  static_cast<void>(c->allocate(4096, "closed"));
  c->close();
  UMA_EXPECT_ERROR((void)c->stats(), errc::invalid_argument, "is closed");
  UMA_EXPECT_ERROR((void)c->quota(), errc::invalid_argument, "is closed");
  UMA_EXPECT_ERROR((void)c->allocate(4096, "after"), errc::invalid_argument, "is closed");
  c->close();  // idempotent
  // The session's lease ended with the close: another client sees nothing live.
  auto other = connect();
  EXPECT_EQ(await_live_bytes(0, [&] { return other->stats().allocator.live_bytes; }), 0u);
}

TEST_F(two_processes, UmaRestartThroughTheOperatorSocketStartsANewGeneration) {
  serve_in_child();
  auto c = connect();
  const auto old = c->allocate(4096, "old generation");
  auto [code, out] = run_cli_status({"restart", "--connect", endpoint()});
  EXPECT_EQ(code, 1) << out;  // a tenant's connection: refused
  EXPECT_NE(out.find("restart: restarting the allocator is the operator's"), std::string::npos)
      << out;
  EXPECT_EQ(c->stats().allocator.generation, 1u);  // nothing restarted
  EXPECT_EQ(run_cli({"restart", "--connect", op_endpoint()}),
            "server " + op_endpoint() + ": allocator restarted, generation 2\n");
  EXPECT_EQ(c->stats().allocator.generation, 2u);
  UMA_EXPECT_ERRC(c->prefetch({old}, {location::host()}), errc::allocator_stopped);  // gen. 1
}

// -- `uma snapshot --connect` ---------------------------------------------------------------------

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The kinds of the events of `region` (generation 1) in a snapshot's JSON, oldest first.
std::vector<std::string> event_kinds(const boost::json::object& snap, std::uint64_t region) {
  std::vector<std::string> out;
  for (const auto& e : snap.at("events").as_array())
    if (e.at("region").to_number<std::uint64_t>() == region &&
        e.at("generation").to_number<std::uint64_t>() == 1)
      out.emplace_back(e.at("kind").as_string());
  return out;
}

TEST_F(two_processes, SnapshotConnectWritesTheServersRegionsAndHistoryAsJsonAndAPage) {
  serve_in_child();
  auto c = connect();
  const auto h = c->allocate(1 << 16, "weights");
  static_cast<void>(c->prefetch({h}, {location::host()}));
  static_cast<void>(c->advise({h}, advice::set_read_mostly));
  const auto before = c->stats();
  const auto json_file = private_file("snap.json");
  const auto html_file = private_file("snap.html");
  run_cli({"snapshot", "--connect", op_endpoint(), "--json", json_file, "--html", html_file});
  const auto snap = boost::json::parse(read_text(json_file)).as_object();
  EXPECT_EQ(snap.at("server").as_string(), op_endpoint());
  EXPECT_EQ(snap.at("generation").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(snap.at("stats").at("live_regions").to_number<std::uint64_t>(), 1u);
  const auto& regions = snap.at("regions").as_array();
  ASSERT_EQ(regions.size(), 1u) << read_text(json_file);
  const auto& r = regions[0].as_object();
  EXPECT_EQ(r.at("id").to_number<std::uint64_t>(), h.id);
  EXPECT_EQ(r.at("label").as_string(), "weights");
  EXPECT_EQ(r.at("bytes").to_number<std::uint64_t>(), std::uint64_t{1} << 16);
  EXPECT_EQ(r.at("session").to_number<std::uint64_t>(), c->session());
  EXPECT_EQ(r.at("advice").as_string(), "read_mostly");
  EXPECT_EQ(r.at("last_prefetch").as_string(), "host");
  EXPECT_EQ(event_kinds(snap, h.id), (std::vector<std::string>{"allocate", "prefetch", "advise"}));
  const auto page = read_text(html_file);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("\"server\":\"" + op_endpoint() + "\""), std::string::npos);
  EXPECT_NE(page.find("\"session\":" + std::to_string(c->session())), std::string::npos);
  EXPECT_NE(page.find("</html>"), std::string::npos);
  // With neither file named, the JSON goes to stdout; taking snapshots changed nothing.
  const auto out = boost::json::parse(run_cli({"snapshot", "--connect", op_endpoint()}));
  EXPECT_EQ(out.at("regions").as_array().size(), 1u);
  const auto after = c->stats();
  EXPECT_EQ(after.allocator.live_bytes, before.allocator.live_bytes);
  EXPECT_EQ(after.allocator.allocations, before.allocator.allocations);
  EXPECT_EQ(after.leases, 1u);
}

TEST_F(two_processes, ChromiumShowsTheSessionColumnOfARemoteSnapshotPage) {
  if (std::system("command -v chromium >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "chromium is not installed (tools/setup.sh installs it): the page cannot be "
                    "rendered";
  serve_in_child();
  auto c = connect();
  static_cast<void>(c->allocate(4096, "remote-weights"));
  const auto page = private_file("snap.html");
  run_cli({"snapshot", "--connect", op_endpoint(), "--html", page});
  child_process chromium({"/bin/sh", "-c",
                          "exec chromium --headless --no-sandbox --disable-gpu "
                          "--virtual-time-budget=5000 --dump-dom \"file://$0\" 2>/dev/null",
                          page});
  const auto dom = chromium.read_all(60s);
  static_cast<void>(chromium.wait(20s));
  EXPECT_NE(dom.find("<th data-key=\"session\""), std::string::npos) << dom.substr(0, 4000);
  EXPECT_NE(dom.find("<td>remote-weights</td>"), std::string::npos);
  EXPECT_NE(dom.find("server " + op_endpoint()), std::string::npos)
      << "the summary names no server";
}

TEST_F(two_processes, SnapshotConnectOfATenantFailsAndChangesNothing) {
  serve_in_child();
  auto c = connect();
  const auto h = c->allocate(4096, "mine");
  const auto before = c->stats();
  const auto json_file = private_file("refused.json");
  const auto [code, out] =
      run_cli_status({"snapshot", "--connect", endpoint(), "--json", json_file});
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("uma: invalid_argument: snapshot: a snapshot shows every tenant's regions "
                     "and history; it is the operator's"),
            std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(json_file)) << "a refused snapshot wrote its file";
  const auto after = c->stats();
  EXPECT_EQ(after.allocator.live_bytes, before.allocator.live_bytes);
  EXPECT_EQ(after.allocator.allocations, before.allocator.allocations);
  EXPECT_EQ(after.sessions, before.sessions);
  EXPECT_EQ(after.leases, 1u);
  EXPECT_EQ(c->release(h), 4096u);
}

TEST_F(two_processes, SnapshotConnectOfAStoppedAllocatorSaysSo) {
  serve_in_child({"--inject-fault", "advise:1:unrecoverable"});
  auto c = connect();
  const auto h = c->allocate(4096);
  UMA_EXPECT_ERRC(c->advise({h}, advice::set_read_mostly), errc::unrecoverable);
  // A stopped supervisor answers every request of the allocator's with allocator_stopped.
  const auto stopped = [&] {
    try {
      static_cast<void>(c->stats());
      return false;
    } catch (const error& e) {
      return e.code() == errc::allocator_stopped;
    }
  };
  // Bounded poll on the condition; each try is a round trip to the server, nothing sleeps.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  bool is_stopped = stopped();
  while (!is_stopped && std::chrono::steady_clock::now() < deadline)
    is_stopped = stopped();
  ASSERT_TRUE(is_stopped);
  const auto [code, out] = run_cli_status({"snapshot", "--connect", op_endpoint()});
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("uma snapshot: the allocator is stopped"), std::string::npos) << out;
}

TEST_F(two_processes, SnapshotConnectWhereNothingServesNamesTheAddress) {
  serve_in_child();
  server_->signal(SIGKILL);
  ASSERT_TRUE(server_->wait(10s));
  const auto [code, out] = run_cli_status({"snapshot", "--connect", op_endpoint()});
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("uma: backend_error: cannot reach the uma server at " + op_endpoint()),
            std::string::npos)
      << out;
}

TEST_F(two_processes, StaleGenerationIdsAreRefusedAcrossTheWire) {
  serve_in_child({"--inject-fault", "prefetch:2:context_lost"});
  auto c = connect();
  const auto old = c->allocate(4096);
  static_cast<void>(c->prefetch({old}, {location::host()}));
  UMA_EXPECT_ERRC(c->prefetch({old}, {location::host()}), errc::context_lost);
  // A request that reaches the supervisor before it learned of the crash is forwarded to the
  // dying incarnation and answered allocator_stopped ("went down while serving"); one that
  // arrives during the restart waits for generation 2.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  const auto stats_now = [&]() -> std::optional<remote_stats> {
    try {
      return c->stats();
    } catch (const error& e) {
      EXPECT_EQ(e.code(), errc::allocator_stopped) << e.what();
      return std::nullopt;
    }
  };
  auto s = stats_now();
  while ((!s || s->allocator.generation != 2 || s->supervisor != uma::supervisor_state::running) &&
         std::chrono::steady_clock::now() < deadline)
    s = stats_now();  // a round trip to the server per try: the poll needs no sleep
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->allocator.generation, 2u);
  UMA_EXPECT_ERRC(c->prefetch({old}, {location::host()}), errc::allocator_stopped);
  UMA_EXPECT_ERRC(c->attributes({old.id, 3}), errc::invalid_argument);
  const auto fresh = c->allocate(4096);
  EXPECT_EQ(fresh, (region_handle{1, 2}));
  EXPECT_EQ(c->prefetch({fresh}, {location::host()}).ranges, 1u);
}

TEST_F(two_processes, ExportingOverCudaIpcIsRefusedWithTheReason) {
  serve_in_child();
  auto c = connect();
  const auto h = c->allocate(4096);
  UMA_EXPECT_ERROR(c->export_ipc(h), errc::not_supported,
                   "managed memory cannot be exported over CUDA IPC");
}

TEST_F(two_processes, AKilledClientProcessHasItsLeasesReleasedByUmaServe) {
  serve_in_child();
  auto c = connect();
  const auto baseline = c->stats().allocator.live_bytes;
  auto helper = start_helper(3, 1 << 18);
  EXPECT_EQ(c->stats().allocator.live_bytes, baseline + 3 * (1 << 18));
  helper->signal(SIGKILL);
  ASSERT_TRUE(helper->wait(10s));
  EXPECT_EQ(await_live_bytes(baseline, [&] { return c->stats().allocator.live_bytes; }), baseline);
  EXPECT_EQ(c->stats().sessions_lost, 1u);
}

TEST_F(two_processes, AServerKilledWhileAClientWaitsIsAClearErrorWithinTheTimeout) {
  serve_in_child();
  auto c = connect(30s);
  static_cast<void>(c->allocate(4096));
  server_->signal(SIGSTOP);  // the next request waits for a reply that will not come
  const auto start = std::chrono::steady_clock::now();
  auto waiting = std::async(std::launch::async, [&]() -> std::optional<error> {
    try {
      static_cast<void>(c->stats());
      return std::nullopt;
    } catch (const error& e) {
      return e;
    }
  });
  EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout);  // it really waits
  server_->signal(SIGKILL);
  ASSERT_EQ(waiting.wait_for(20s), std::future_status::ready);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  const auto err = waiting.get();
  ASSERT_TRUE(err) << "the request succeeded against a killed server";
  EXPECT_EQ(err->code(), errc::allocator_stopped) << err->what();
  EXPECT_NE(std::string(err->what()).find("the uma server at " + endpoint() + " went down"),
            std::string::npos)
      << err->what();
  EXPECT_LT(elapsed, 15s) << "seen only at the timeout";
  // Later calls fail at once, with the same reason.
  UMA_EXPECT_ERRC(static_cast<void>(c->stats()), errc::allocator_stopped);
}

TEST_F(two_processes, ConnectingWhereNothingServesNamesTheAddress) {
  serve_in_child();
  server_->signal(SIGKILL);
  ASSERT_TRUE(server_->wait(10s));
  UMA_EXPECT_ERROR(connect(), errc::backend_error, "cannot reach the uma server at " + endpoint());
}

// Issue 35, finding 7: a second server on a live path took it over silently, and the first one's
// exit then deleted the second's socket file.
TEST_F(two_processes, ASecondUmaServeOnALivePathIsRefusedAndTheFirstKeepsServing) {
  serve_in_child();
  child_process second({"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", cli_path(), "serve", "--socket",
                        socket(), "--operator-socket", private_file("o2.sock"), "--for", "60",
                        "--backend", "host"});
  const auto said = second.read_line(20s);
  const auto status = second.wait(20s);
  ASSERT_TRUE(status) << "the second uma serve did not stop";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1);
  ASSERT_TRUE(said);
  EXPECT_NE(said->find("another server listens there"), std::string::npos) << *said;
  EXPECT_FALSE(std::filesystem::exists(private_file("o2.sock")));
  auto honest = connect();  // the first server's socket is still there, and still its own
  EXPECT_GE(honest->stats().sessions, 1u);
}

TEST_F(two_processes, AServerThatStopsRemovesOnlyItsOwnSocketFile) {
  serve_here();
  std::filesystem::remove(socket());  // someone removes the file; another server takes the path
  auto successor = std::make_unique<wire_server>(
      sys_, gw_,
      wire_server_config{.socket_path = socket(),
                         .operator_socket_path = private_file("successor.operator"),
                         .operator_secret = operator_});
  wire_.reset();  // the first server stops: the file at the path is not its own any more
  ASSERT_TRUE(std::filesystem::exists(socket()));
  EXPECT_GE(connect()->stats().sessions, 1u);
  successor.reset();
  EXPECT_FALSE(std::filesystem::exists(socket()));
}

TEST_F(two_processes, TheOperatorSocketMustDifferFromTheTenantsSocket) {
  serve_here();
  // The same file, spelled otherwise: refused before anything listens.
  UMA_EXPECT_ERROR(wire_server(sys_, gw_,
                               wire_server_config{.socket_path = private_file("t.sock"),
                                                  .operator_socket_path = dir_ + "/./t.sock"}),
                   errc::invalid_argument, "the operator socket must differ");
  EXPECT_FALSE(std::filesystem::exists(private_file("t.sock")));
  child_process same({cli_path(), "serve", "--socket", private_file("u.sock"), "--operator-socket",
                      private_file("u.sock"), "--backend", "host"});
  const auto status = same.wait(20s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2);
}

TEST_F(two_processes, TheRegionPageCapSetThroughItsOldNameStillCapsPages) {
  // wire_limits::region_page_size is max_region_page's old name, honoured for one release: a
  // cap of 0 alone is refused, so a server that starts took the old name's 2 instead.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const wire_limits renamed{.max_region_page = 0, .region_page_size = 2};
#pragma GCC diagnostic pop
  UMA_EXPECT_ERROR(wire_server(sys_, remote_allocator_actor{},
                               wire_server_config{.socket_path = private_file("zero.sock"),
                                                  .limits = {.max_region_page = 0}}),
                   errc::invalid_argument, "a limit is zero");
  serve_here(renamed);
  auto tenant = connect();
  for (int i = 0; i < 5; ++i)
    (void)tenant->allocate(4096, "paged");
  EXPECT_EQ(tenant->regions().size(), 5u);  // three pages of at most 2 rows
}

TEST_F(two_processes, UmaServeStopsOnSigtermAndAfterFor) {
  serve_in_child();
  server_->signal(SIGTERM);
  auto status = server_->wait(20s);
  ASSERT_TRUE(status) << "uma serve ignored SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);

  child_process bounded(
      {cli_path(), "serve", "--socket", private_file("b.sock"), "--for", "1", "--backend", "host"});
  status = bounded.wait(20s);
  ASSERT_TRUE(status) << "uma serve --for 1 did not stop";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

}  // namespace
}  // namespace uma
