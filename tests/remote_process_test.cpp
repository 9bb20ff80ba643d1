// The remote interface across processes on 127.0.0.1, over CAF's middleman. Either this test
// process serves (a supervisor and a gateway published on a free port) and children connect to
// it, or a child `uma serve` serves and this process connects. Children are bounded (`--for`,
// a helper that exits after a minute) and always killed and reaped (test::child_process).

#include <gtest/gtest.h>

#include <cstdlib>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <boost/json/parse.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/client.hpp>
#include <uma/actors/prometheus_text.hpp>
#include <uma/actors/remote_client.hpp>
#include <uma/actors/remote_gateway.hpp>
#include <uma/actors/remote_tls.hpp>
#include <uma/messages/register_types.hpp>
#include <uma/sys/host_backend.hpp>
#include "support/actor_fixture.hpp"
#include "support/child_process.hpp"
#include "support/gateway_request.hpp"
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
  remote_config() {
    register_types(*this);
    load<caf::io::middleman>();
  }
};

class two_processes : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!dir_.empty())
      std::filesystem::remove_all(dir_);
    // The actor system waits for every actor when it goes: stop what serve_here started.
    local_.reset();
    if (gw_)
      caf::anon_send_exit(gw_, caf::exit_reason::user_shutdown);
    if (sup_)
      caf::anon_send_exit(sup_, caf::exit_reason::user_shutdown);
  }

  // -- this process serves ---------------------------------------------------------------------

  /// The backend the servers use: host, or what UMA_TEST_BACKEND names (the GPU machine runs
  /// these tests with UMA_TEST_BACKEND=cuda).
  static std::string backend_name() {
    const char* env = std::getenv("UMA_TEST_BACKEND");
    return env != nullptr && *env != '\0' ? env : "host";
  }

  /// A supervised allocator and its gateway, published on a free loopback port.
  void serve_here() {
    supervisor_config cfg;
    const auto choice = parse_backend_choice(backend_name());
    cfg.allocator.backend =
        choice ? make_backend(*choice) : std::shared_ptr<backend>(std::make_shared<host_backend>());
    cfg.allocator.quota_bytes = 1ull << 30;
    sup_ = spawn_supervisor(sys_, std::move(cfg));
    gw_ = spawn_remote_gateway(sys_, sup_, {.operator_secret = operator_});
    port_ = publish_gateway(sys_, gw_, 0, "127.0.0.1");
    local_ = std::make_unique<client>(sys_, sup_);
  }

  /// One request to the local gateway, without the middleman.
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
#if defined(__SANITIZE_ADDRESS__)
    const auto mb = std::to_string(kib / 1024);
    const auto half = std::to_string(kib / 2048);
    return "export ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}max_allocation_size_mb=" + half +
           ":hard_rss_limit_mb=" + mb + "\"";
#else
    return "ulimit -v " + std::to_string(kib);
#endif
  }

  /// Starts `uma serve` on a free loopback port and reads the port from its first line; with
  /// `memory_limit_kib`, under `ulimit -v` of that many KiB.
  void serve_in_child(std::vector<std::string> extra = {}, std::uint64_t memory_limit_kib = 0) {
    std::vector<std::string> argv{cli_path(),  "serve",        "--port",
                                  "0",         "--for",        "60",
                                  "--backend", backend_name(), "--operator-key-file",
                                  key_file()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    if (memory_limit_kib != 0)
      argv.insert(argv.begin(), {"/bin/sh", "-c",
                                 memory_limit_prefix(memory_limit_kib) + " && exec \"$0\" \"$@\""});
    server_ = std::make_unique<child_process>(argv);
    const auto line = server_->read_line(20s);
    ASSERT_TRUE(line) << "uma serve printed no line";
    const std::string prefix = "uma serve: listening on 127.0.0.1:";
    ASSERT_EQ(line->rfind(prefix, 0), 0u) << *line;
    port_ = static_cast<std::uint16_t>(std::stoul(line->substr(prefix.size())));
  }

  std::unique_ptr<remote_client> connect(std::chrono::milliseconds timeout = 10s) {
    return std::make_unique<remote_client>(sys_, "127.0.0.1", port_, timeout);
  }

  [[nodiscard]] std::string endpoint() const {
    return "127.0.0.1:" + std::to_string(port_);
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

  /// A file of the test's private directory (the one the operator key goes to).
  std::string private_file(const std::string& name) {
    return std::filesystem::path(key_file()).parent_path() / name;
  }

  /// Starts the helper client: it allocates `regions` x `bytes` (and with `advise` prefetches
  /// them to the host and advises them read-mostly), prints a ready line and waits to be killed.
  std::unique_ptr<child_process> start_helper(int regions, std::uint64_t bytes,
                                              bool advise = false) {
    std::vector<std::string> argv{helper_path(), "127.0.0.1", std::to_string(port_),
                                  std::to_string(regions), std::to_string(bytes)};
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

  /// Where the child `uma serve` writes its operator key: a fresh private directory per test.
  std::string key_file() {
    if (dir_.empty()) {
      char tmpl[] = "/tmp/uma-remote-test-XXXXXX";
      const char* made = ::mkdtemp(tmpl);
      EXPECT_NE(made, nullptr);
      dir_ = made != nullptr ? made : "/tmp";
    }
    return dir_ + "/operator.key";
  }

  std::string dir_;
  operator_key operator_ = make_operator_key();
  remote_config cfg_;
  caf::actor_system sys_{cfg_};
  std::uint16_t port_ = 0;
  allocator_supervisor_actor sup_;
  remote_allocator_actor gw_;
  std::unique_ptr<client> local_;
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

TEST_F(two_processes, PrefetchAndAdviceByIdFromAnotherProcessChangeTheAttributesSeenHere) {
  serve_here();
  const auto before = local_->flush();
  auto helper = start_helper(2, 65536, true);
  const auto after = local_->flush();
  EXPECT_EQ(after.prefetches, before.prefetches + 2);
  EXPECT_EQ(after.advises, before.advises + 2);
  EXPECT_EQ(after.live_bytes, before.live_bytes + 2 * 65536);
  const auto rows = ask_gateway<std::vector<remote_region_info>>(regions_atom_v, operator_);
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

/// Runs the attacker in `mode` to completion (bounded) and returns its stdout.
std::string attack(std::uint16_t port, std::vector<std::string> mode) {
  std::vector<std::string> argv{attacker_path(), "127.0.0.1", std::to_string(port)};
  argv.insert(argv.end(), mode.begin(), mode.end());
  child_process attacker(argv);
  auto out = attacker.read_all(20s);
  const auto status = attacker.wait(20s);
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << out;
  return out;
}

TEST_F(two_processes, MaliciousPeersLeaveAnHonestSessionIntact) {
  serve_in_child();
  auto honest = connect();
  const auto h = honest->allocate(1 << 16, "honest");
  static_cast<void>(honest->advise({h}, advice::set_read_mostly));
  const auto before = honest->stats();
  // Another process names the honest session's id (with its own secret), asks to lift the quota,
  // opens a session naming the gateway itself, sends the gateway exits, links to it and dies.
  const auto forged = attack(port_, {"forge", std::to_string(honest->session())});
  EXPECT_EQ(forged.find(": ok"), std::string::npos) << forged;
  EXPECT_NE(forged.find("release: refused"), std::string::npos) << forged;
  EXPECT_NE(forged.find("close_session: refused"), std::string::npos) << forged;
  EXPECT_NE(forged.find("quota: refused"), std::string::npos) << forged;
  const auto self_peer = attack(port_, {"self-peer"});
  EXPECT_NE(self_peer.find("self-peer: refused"), std::string::npos) << self_peer;
  EXPECT_NE(self_peer.find("the serving node's own gateway"), std::string::npos) << self_peer;
  EXPECT_NE(attack(port_, {"exit"}).find("exit: sent"), std::string::npos);
  EXPECT_NE(attack(port_, {"link"}).find("link: linked and died"), std::string::npos);
  // The server still serves, and the honest session, its lease and its advice are intact.
  ASSERT_FALSE(server_->wait(0ms)) << "uma serve exited";
  EXPECT_TRUE(honest->attributes(h).read_mostly);
  EXPECT_EQ(honest->prefetch({h}, {location::host()}).bytes, std::uint64_t{1} << 16);
  const auto after = honest->stats();
  EXPECT_EQ(after.allocator.live_bytes, before.allocator.live_bytes);
  EXPECT_EQ(after.allocator.quota_bytes, before.allocator.quota_bytes);
  EXPECT_EQ(after.leases, 1u);
  EXPECT_EQ(honest->release(h), std::uint64_t{1} << 16);
}

/// Starts the attacker in a raw-TCP `mode` and waits for its first line ("sent", "connected").
std::unique_ptr<child_process> start_raw_attacker(std::uint16_t port, const std::string& mode) {
  auto a = std::make_unique<child_process>(
      std::vector<std::string>{attacker_path(), "127.0.0.1", std::to_string(port), mode});
  const auto line = a->read_line(20s);
  EXPECT_TRUE(line && (*line == "sent" || *line == "connected")) << (line ? *line : "no line");
  return a;
}

TEST_F(two_processes, HugeBaspHeadersAndGarbageAreDroppedAndAnHonestClientKeepsItsLatency) {
  serve_in_child({}, 2'000'000);  // 2 GB of address space: one 1 GiB payload per attacker would
                                  // not fit four times
  auto honest = connect();
  const auto h = honest->allocate(1 << 16, "honest");
  std::vector<std::unique_ptr<child_process>> attackers;
  for (int i = 0; i < 4; ++i)
    attackers.push_back(start_raw_attacker(port_, "huge-header"));
  attackers.push_back(start_raw_attacker(port_, "garbage"));
  std::vector<double> ms;
  for (int i = 0; i < 200; ++i) {
    const auto start = std::chrono::steady_clock::now();
    static_cast<void>(honest->attributes(h));
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  const double p99 = ms[ms.size() * 99 / 100];
  std::printf("honest client with 5 malicious connections open: p50 %.2f ms, p99 %.2f ms\n",
              ms[ms.size() / 2], p99);
  EXPECT_LT(p99, 100.0);
  ASSERT_FALSE(server_->wait(0ms)) << "uma serve died";
  EXPECT_EQ(honest->stats().leases, 1u);
  EXPECT_EQ(honest->release(h), std::uint64_t{1} << 16);
}

TEST_F(two_processes, AnIdleConnectionIsClosedAfterTheIdleTimeout) {
  serve_in_child({"--idle-timeout", "1"});
  auto idle = start_raw_attacker(port_, "idle");
  const auto verdict = idle->read_line(20s);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->rfind("closed by the server after", 0), 0u) << *verdict;
}

// -- TLS ----------------------------------------------------------------------------------------

/// Makes a throw-away CA with a server and a client certificate, and a second CA with a rogue
/// certificate, in `dir` (openssl CLI, RSA 2048, valid one day).
void make_test_certificates(const std::string& dir) {
  const std::string script =
      "set -e; cd '" + dir +
      "'; q() { \"$@\" >/dev/null 2>&1; }; "
      "for ca in ca rogueca; do q openssl req -x509 -newkey rsa:2048 -nodes -keyout $ca.key "
      "-out $ca.pem -days 1 -subj \"/CN=uma test $ca\"; done; "
      "for n in server:ca client:ca rogue:rogueca; do c=${n%:*}; ca=${n#*:}; "
      "q openssl req -newkey rsa:2048 -nodes -keyout $c.key -out $c.csr -subj \"/CN=uma $c\"; "
      "q openssl x509 -req -in $c.csr -CA $ca.pem -CAkey $ca.key -CAcreateserial -out $c.pem "
      "-days 1; done; echo made";
  child_process make({"/bin/sh", "-c", script});
  const auto out = make.read_all(60s);
  ASSERT_EQ(out, "made\n") << "openssl failed";
}

TEST_F(two_processes, TlsRoundTripWorksAndPeersWithoutAValidCertificateAreRefused) {
  const auto dir = std::filesystem::path(key_file()).parent_path().string();
  make_test_certificates(dir);
  serve_in_child({"--tls-cert", dir + "/server.pem", "--tls-key", dir + "/server.key", "--tls-ca",
                  dir + "/ca.pem"});
  {
    remote_config tls_cfg;
    enable_tls(tls_cfg, {dir + "/client.pem", dir + "/client.key", dir + "/ca.pem"});
    caf::actor_system tls_sys{tls_cfg};
    remote_client c(tls_sys, "127.0.0.1", port_, 10s);
    const auto h = c.allocate(1 << 16, "over tls");
    static_cast<void>(c.advise({h}, advice::set_read_mostly));
    EXPECT_TRUE(c.attributes(h).read_mostly);
    EXPECT_EQ(c.stats().leases, 1u);
    EXPECT_EQ(c.release(h), std::uint64_t{1} << 16);
  }
  // A certificate of another CA, and no TLS at all: refused before BASP.
  for (const auto& tls :
       std::vector<std::vector<std::string>>{{"--tls-cert", dir + "/rogue.pem", "--tls-key",
                                              dir + "/rogue.key", "--tls-ca", dir + "/rogueca.pem"},
                                             {}}) {
    std::vector<std::string> argv{cli_path(), "stats", "--connect", endpoint()};
    argv.insert(argv.end(), tls.begin(), tls.end());
    child_process cli(argv);
    const auto out = cli.read_all(20s);
    const auto status = cli.wait(20s);
    ASSERT_TRUE(status);
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << out;
    EXPECT_EQ(out.find("sessions:"), std::string::npos) << out;
  }
  EXPECT_FALSE(server_->wait(0ms)) << "uma serve died";
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
  const auto json =
      run_cli({"regions", "--connect", endpoint(), "--json", "--operator-key-file", key_file()});
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

TEST_F(two_processes, UmaRestartWithTheOperatorKeyStartsANewGeneration) {
  serve_in_child();
  auto c = connect();
  const auto old = c->allocate(4096, "old generation");
  auto [code, out] = run_cli_status({"restart", "--connect", endpoint()});
  EXPECT_EQ(code, 2) << out;  // no key: refused before anything is sent
  const auto wrong = private_file("wrong.key");
  std::ofstream(wrong) << "0123456789abcdef0123456789abcdef\n";
  std::tie(code, out) =
      run_cli_status({"restart", "--connect", endpoint(), "--operator-key-file", wrong});
  EXPECT_EQ(code, 1) << out;
  EXPECT_EQ(c->stats().allocator.generation, 1u);  // nothing restarted
  EXPECT_EQ(run_cli({"restart", "--connect", endpoint(), "--operator-key-file", key_file()}),
            "server " + endpoint() + ": allocator restarted, generation 2\n");
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
  run_cli({"snapshot", "--connect", endpoint(), "--operator-key-file", key_file(), "--json",
           json_file, "--html", html_file});
  const auto snap = boost::json::parse(read_text(json_file)).as_object();
  EXPECT_EQ(snap.at("server").as_string(), endpoint());
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
  EXPECT_NE(page.find("\"server\":\"" + endpoint() + "\""), std::string::npos);
  EXPECT_NE(page.find("\"session\":" + std::to_string(c->session())), std::string::npos);
  EXPECT_NE(page.find("</html>"), std::string::npos);
  // With neither file named, the JSON goes to stdout; taking snapshots changed nothing.
  const auto out = boost::json::parse(
      run_cli({"snapshot", "--connect", endpoint(), "--operator-key-file", key_file()}));
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
  run_cli({"snapshot", "--connect", endpoint(), "--operator-key-file", key_file(), "--html", page});
  child_process chromium({"/bin/sh", "-c",
                          "exec chromium --headless --no-sandbox --disable-gpu "
                          "--virtual-time-budget=5000 --dump-dom \"file://$0\" 2>/dev/null",
                          page});
  const auto dom = chromium.read_all(60s);
  static_cast<void>(chromium.wait(20s));
  EXPECT_NE(dom.find("<th data-key=\"session\""), std::string::npos) << dom.substr(0, 4000);
  EXPECT_NE(dom.find("<td>remote-weights</td>"), std::string::npos);
  EXPECT_NE(dom.find("server " + endpoint()), std::string::npos) << "the summary names no server";
}

TEST_F(two_processes, SnapshotConnectWithoutTheOperatorKeyFailsAndChangesNothing) {
  serve_in_child();
  auto c = connect();
  const auto h = c->allocate(4096, "mine");
  const auto before = c->stats();
  const auto wrong = private_file("wrong.key");
  std::ofstream(wrong) << to_hex(make_operator_key()) << "\n";
  const auto json_file = private_file("refused.json");
  auto [code, out] = run_cli_status(
      {"snapshot", "--connect", endpoint(), "--operator-key-file", wrong, "--json", json_file});
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("uma: invalid_argument: snapshot needs the serving node's operator key"),
            std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(json_file)) << "a refused snapshot wrote its file";
  std::tie(code, out) = run_cli_status(
      {"snapshot", "--connect", endpoint(), "--operator-key-file", private_file("none.key")});
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("--operator-key-file " + private_file("none.key") + ": no operator key"),
            std::string::npos)
      << out;
  std::tie(code, out) = run_cli_status({"snapshot", "--connect", endpoint()});
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("uma snapshot: --connect needs --operator-key-file PATH"), std::string::npos)
      << out;
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
  const auto [code, out] =
      run_cli_status({"snapshot", "--connect", endpoint(), "--operator-key-file", key_file()});
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("uma snapshot: the allocator is stopped"), std::string::npos) << out;
}

TEST_F(two_processes, SnapshotConnectWhereNothingServesNamesTheAddress) {
  serve_in_child();
  server_->signal(SIGKILL);
  ASSERT_TRUE(server_->wait(10s));
  const auto [code, out] =
      run_cli_status({"snapshot", "--connect", endpoint(), "--operator-key-file", key_file()});
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("uma: backend_error: cannot reach the uma server at " + endpoint()),
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

TEST_F(two_processes, UmaServeStopsOnSigtermAndAfterFor) {
  serve_in_child();
  server_->signal(SIGTERM);
  auto status = server_->wait(20s);
  ASSERT_TRUE(status) << "uma serve ignored SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);

  child_process bounded({cli_path(), "serve", "--port", "0", "--for", "1", "--backend", "host"});
  status = bounded.wait(20s);
  ASSERT_TRUE(status) << "uma serve --for 1 did not stop";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
}

}  // namespace
}  // namespace uma
