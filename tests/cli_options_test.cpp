#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "tools/cli_options.hpp"

namespace uma::cli {
namespace {

parse_result parse(std::vector<std::string_view> args) {
  return parse_arguments(args);
}

TEST(CliOptions, NoArgumentsAsksForTheOverview) {
  const auto r = parse({});
  ASSERT_TRUE(r.parsed);
  EXPECT_TRUE(r.parsed->help);
  EXPECT_EQ(r.parsed->what, command::help);
}

TEST(CliOptions, ACommandTakesItsOwnOptionsInBothSpellings) {
  const auto r = parse({"demo", "--backend=host", "--producers", "3", "--floats=1024"});
  ASSERT_TRUE(r.parsed) << r.error;
  EXPECT_EQ(r.parsed->what, command::demo);
  EXPECT_EQ(r.parsed->backend, backend_choice::host);
  EXPECT_EQ(r.parsed->producers, 3u);
  EXPECT_EQ(r.parsed->floats, 1024u);
  EXPECT_EQ(r.parsed->consumers, 2u);  // default kept
}

TEST(CliOptions, StatsFormatsAndWorkload) {
  const auto json = parse({"stats", "--json", "--workload", "none"});
  ASSERT_TRUE(json.parsed) << json.error;
  EXPECT_EQ(json.parsed->format, output_format::json);
  EXPECT_FALSE(json.parsed->workload);
  const auto prom = parse({"stats", "--prometheus"});
  ASSERT_TRUE(prom.parsed) << prom.error;
  EXPECT_EQ(prom.parsed->format, output_format::prometheus);
  EXPECT_TRUE(prom.parsed->workload);
}

TEST(CliOptions, SnapshotTakesFilesAndRefusesTwoOutputsOnStdout) {
  const auto r = parse({"snapshot", "--json", "s.json", "--html=s.html", "--workload", "none"});
  ASSERT_TRUE(r.parsed) << r.error;
  EXPECT_EQ(r.parsed->what, command::snapshot);
  EXPECT_EQ(r.parsed->snapshot_json, "s.json");
  EXPECT_EQ(r.parsed->snapshot_html, "s.html");
  EXPECT_FALSE(r.parsed->workload);
  EXPECT_EQ(parse({"snapshot", "--json", "-", "--html", "-"}).error,
            "uma snapshot: --json - and --html - cannot both write to stdout");
  EXPECT_EQ(parse({"snapshot", "--html="}).error, "uma snapshot: --html: 1 required FILE missing");
  EXPECT_EQ(parse({"snapshot", "--json", ""}).error,
            "uma snapshot: --json needs a file name (- for stdout)");
  EXPECT_FALSE(parse({"snapshot", "--prometheus"}).parsed);
}

TEST(CliOptions, SnapshotConnectTakesAnAddressAndNoLocalOptions) {
  const auto r =
      parse({"snapshot", "--connect", "[::1]:4242", "--html", "s.html", "--tls-ca", "ca.pem"});
  ASSERT_TRUE(r.parsed) << r.error;
  EXPECT_TRUE(r.parsed->connect);
  EXPECT_EQ(r.parsed->connect_target, "[::1]:4242");
  EXPECT_EQ(r.parsed->connect_host, "::1");
  EXPECT_EQ(r.parsed->connect_port, 4242);
  EXPECT_EQ(r.parsed->snapshot_html, "s.html");
  EXPECT_EQ(r.parsed->hardening.size(), 1u);
  const auto unix_socket = parse({"snapshot", "--connect", "unix:/run/uma/uma.sock.operator"});
  ASSERT_TRUE(unix_socket.parsed) << unix_socket.error;
  EXPECT_EQ(unix_socket.parsed->connect_target, "unix:/run/uma/uma.sock.operator");
  EXPECT_EQ(parse({"snapshot", "--connect", "127.0.0.1"}).error,
            "uma snapshot: --connect needs unix:PATH or HOST:PORT with a port from 1 to 65535, "
            "not '127.0.0.1'");
  EXPECT_EQ(parse({"snapshot", "--connect", "h:1", "--workload", "none"}).error,
            "uma snapshot: --workload runs on a local allocator; it does not go with --connect");
  EXPECT_EQ(parse({"snapshot", "--connect", "h:1", "--backend", "host"}).error,
            "uma snapshot: --backend and --host-devices choose a local allocator's backend; the "
            "server at --connect has its own");
  EXPECT_EQ(parse({"snapshot", "--tls-ca", "k"}).error,
            "uma snapshot: --tls-ca is for a serving node's snapshot; it goes with --connect");
  EXPECT_FALSE(parse({"snapshot", "--connect", "h:1", "--tenant-quota", "5"}).parsed);
}

TEST(CliOptions, HelpForACommandEitherWay) {
  for (const auto& args : {std::vector<std::string_view>{"stats", "--help"},
                           std::vector<std::string_view>{"help", "stats"}}) {
    const auto r = parse(args);
    ASSERT_TRUE(r.parsed) << r.error;
    EXPECT_TRUE(r.parsed->help);
    EXPECT_EQ(r.parsed->what, command::stats);
  }
}

TEST(CliOptions, VersionGoesAlone) {
  const auto r = parse({"--version"});
  ASSERT_TRUE(r.parsed) << r.error;
  EXPECT_TRUE(r.parsed->version);
  EXPECT_FALSE(r.parsed->help);
  for (const auto& args : {std::vector<std::string_view>{"--version", "info"},
                           std::vector<std::string_view>{"--version", "--help"},
                           std::vector<std::string_view>{"--version", "help"}})
    EXPECT_EQ(parse(args).error, "uma: --version goes alone, without a command or --help");
  EXPECT_EQ(parse({"info", "--version"}).error, "uma info: unknown option '--version'");
}

TEST(CliOptions, RefusesAnUnknownOptionNamingTheCommand) {
  const auto r = parse({"stats", "--jsno"});
  EXPECT_FALSE(r.parsed);
  EXPECT_EQ(r.error, "uma stats: unknown option '--jsno'");
  EXPECT_EQ(r.context, command::stats);
}

TEST(CliOptions, RefusesAnotherCommandsOption) {
  const auto r = parse({"info", "--json"});
  EXPECT_FALSE(r.parsed);
  EXPECT_EQ(r.error, "uma info: unknown option '--json'");
}

TEST(CliOptions, RefusesAnUnknownBackend) {
  const auto r = parse({"demo", "--backend", "gpu"});
  EXPECT_FALSE(r.parsed);
  EXPECT_EQ(r.error, "uma demo: unknown backend 'gpu' (expected auto, cuda or host)");
}

TEST(CliOptions, HostDevicesTakeACountAndAnOptionalSize) {
  EXPECT_EQ(parse({"info"}).parsed->host_devices, emulated_devices{});
  EXPECT_EQ(parse({"info", "--host-devices", "2:4096"}).parsed->host_devices,
            (emulated_devices{2, 4096}));
  EXPECT_EQ(parse({"stats", "--host-devices", "0"}).parsed->host_devices, (emulated_devices{0, 0}));
  for (const char* bad : {"65", "-1", "x", "2:", "2:0", ":4096", "1:2:3"}) {
    const auto r = parse({"demo", "--host-devices", bad});
    EXPECT_FALSE(r.parsed) << bad;
    EXPECT_NE(r.error.find("--host-devices needs N[:BYTES]"), std::string::npos) << r.error;
  }
  EXPECT_FALSE(parse({"stats", "--connect", "h:1", "--host-devices", "2"}).parsed);
}

TEST(CliOptions, RefusesBothMachineFormatsAtOnce) {
  const auto r = parse({"stats", "--json", "--prometheus"});
  EXPECT_FALSE(r.parsed);
  EXPECT_EQ(r.error, "uma stats: --json and --prometheus exclude each other");
}

TEST(CliOptions, RefusesZeroJunkAndOversizedCounts) {
  for (const char* value : {"0", "-1", "3x", "", "65"}) {
    const auto r = parse({"demo", "--producers", value});
    EXPECT_FALSE(r.parsed) << value;
    EXPECT_NE(r.error.find("uma demo: --producers needs a count from 1 to 64"), std::string::npos)
        << r.error;
  }
}

TEST(CliOptions, RefusesAMissingValueAndAValueForAFlag) {
  EXPECT_EQ(parse({"demo", "--floats"}).error, "uma demo: --floats: 1 required N missing");
  const auto flag = parse({"stats", "--json=yes"});
  EXPECT_FALSE(flag.parsed);
  EXPECT_TRUE(flag.error.starts_with("uma stats: ")) << flag.error;
  EXPECT_NE(flag.error.find("json"), std::string::npos) << flag.error;
}

TEST(CliOptions, CollectsCafOptionsOfTheCommandsThatRunAnActorSystem) {
  const auto r =
      parse({"stats", "--caf.scheduler.max-threads=4", "--json", "--caf.logger.verbosity=quiet"});
  ASSERT_TRUE(r.parsed) << r.error;
  EXPECT_EQ(r.parsed->caf_args, (std::vector<std::string>{"--caf.scheduler.max-threads=4",
                                                          "--caf.logger.verbosity=quiet"}));
  EXPECT_EQ(parse({"info", "--caf.scheduler.max-threads=4"}).error,
            "uma info: unknown option '--caf.scheduler.max-threads'");
}

TEST(CliOptions, ServeTakesAMetricsEndpointPortZeroIncluded) {
  const auto r = parse({"serve", "--port", "0", "--metrics", "127.0.0.1:0"});
  ASSERT_TRUE(r.parsed) << r.error;
  ASSERT_TRUE(r.parsed->metrics);
  EXPECT_EQ(r.parsed->metrics->first, "127.0.0.1");
  EXPECT_EQ(r.parsed->metrics->second, 0);
  EXPECT_EQ(parse({"serve", "--port", "0", "--metrics", "9100"}).error,
            "uma serve: --metrics needs HOST:PORT with a port from 0 to 65535, not '9100'");
}

TEST(CliOptions, GeneratedHelpListsEveryOptionOfTheCommand) {
  const auto text = usage(command::serve);
  for (const char* option : {"--port", "--bind", "--metrics", "--for", "--quota", "--backend",
                             "--inject-fault", "--help"})
    EXPECT_NE(text.find(option), std::string::npos) << option << " missing in\n" << text;
  EXPECT_NE(usage(command::help).find("exit status: 0 ok, 1 runtime failure"), std::string::npos);
}

TEST(CliOptions, RefusesUnknownCommandsAndStrayArguments) {
  EXPECT_EQ(parse({"frobnicate"}).error, "uma: unknown command 'frobnicate'");
  EXPECT_EQ(parse({"--backend", "host", "info"}).error,
            "uma: expected a command before '--backend'");
  EXPECT_EQ(parse({"info", "extra"}).error, "uma info: unexpected argument 'extra'");
}

TEST(CliOptions, EveryCommandHasAUsageTextStartingWithItsSynopsis) {
  EXPECT_TRUE(usage(command::help).starts_with("usage: uma <command>"));
  for (const auto c : {command::info, command::demo, command::stats, command::serve,
                       command::regions, command::snapshot})
    EXPECT_TRUE(usage(c).starts_with("usage: uma " + std::string(to_string(c)))) << to_string(c);
}

TEST(CliOptions, ServeListensOnLoopbackUnlessBindSaysOtherwise) {
  const auto r = parse({"serve", "--port", "0", "--for=5", "--quota", "1048576"});
  ASSERT_TRUE(r.parsed) << r.error;
  EXPECT_EQ(r.parsed->what, command::serve);
  EXPECT_EQ(r.parsed->port, std::uint16_t{0});
  EXPECT_EQ(r.parsed->bind, "127.0.0.1");
  EXPECT_FALSE(r.parsed->bind_given);
  EXPECT_EQ(r.parsed->serve_seconds, 5u);
  EXPECT_EQ(r.parsed->quota_bytes, 1048576u);
  const auto any = parse({"serve", "--port", "4242", "--bind", "0.0.0.0"});
  ASSERT_TRUE(any.parsed) << any.error;
  EXPECT_EQ(any.parsed->bind, "0.0.0.0");
  EXPECT_TRUE(any.parsed->bind_given);
}

TEST(CliOptions, ServeRefusesABadPortABindWithoutAPortAndAnEmptyBind) {
  const auto socket_only = parse({"serve", "--socket", "/tmp/u.sock", "--socket-mode", "0660"});
  ASSERT_TRUE(socket_only.parsed) << socket_only.error;
  EXPECT_FALSE(socket_only.parsed->port);
  EXPECT_EQ(socket_only.parsed->socket_path, "/tmp/u.sock");
  EXPECT_EQ(socket_only.parsed->socket_mode, 0660u);
  EXPECT_EQ(parse({"serve", "--socket-mode", "0666"}).error,
            "uma serve: --socket-mode needs 0600 or 0660, not '0666'");
  EXPECT_EQ(parse({"serve", "--bind", "0.0.0.0"}).error,
            "uma serve: --bind is for TCP; it goes with --port");
  EXPECT_EQ(parse({"serve", "--port", "65536"}).error,
            "uma serve: --port needs a port from 0 to 65535, not '65536'");
  EXPECT_EQ(parse({"serve", "--port", "1", "--bind="}).error,
            "uma serve: --bind: 1 required ADDRESS missing");
  EXPECT_EQ(parse({"serve", "--port", "1", "--for", "0"}).error,
            "uma serve: --for needs seconds from 1 to 604800, not '0'");
}

TEST(CliOptions, ServeRefusesAnOperatorSocketThatIsTheTenantsSocket) {
  EXPECT_EQ(parse({"serve", "--socket", "/tmp/u.sock", "--operator-socket", "/tmp/u.sock"}).error,
            "uma serve: --operator-socket must differ from --socket (the operator's connections "
            "would be the tenants')");
  EXPECT_TRUE(
      parse({"serve", "--socket", "/tmp/u.sock", "--operator-socket", "/tmp/o.sock"}).parsed);
}

TEST(CliOptions, ConnectTakesHostAndPort) {
  const auto r = parse({"stats", "--connect", "127.0.0.1:4242", "--json"});
  ASSERT_TRUE(r.parsed) << r.error;
  EXPECT_TRUE(r.parsed->connect);
  EXPECT_EQ(r.parsed->connect_host, "127.0.0.1");
  EXPECT_EQ(r.parsed->connect_port, 4242);
  const auto v6 = parse({"regions", "--connect=[::1]:7"});
  ASSERT_TRUE(v6.parsed) << v6.error;
  EXPECT_EQ(v6.parsed->connect_host, "::1");
  for (const char* bad : {"4242", "host:", ":4242", "host:0", "host:65536", "::1:4242", "h:4x"})
    EXPECT_FALSE(parse_endpoint(bad)) << bad;
}

TEST(CliOptions, ConnectExcludesTheLocalAllocatorsOptions) {
  EXPECT_EQ(parse({"stats", "--connect", "h:1", "--workload", "none"}).error,
            "uma stats: --workload runs on a local allocator; it does not go with --connect");
  EXPECT_NE(parse({"stats", "--connect", "h:1", "--backend", "host"}).error.find("has its own"),
            std::string::npos);
  EXPECT_EQ(parse({"regions"}).error,
            "uma regions: --connect unix:PATH or HOST:PORT is required (the address of a `uma "
            "serve`)");
  EXPECT_EQ(parse({"regions", "--connect", "h:1", "--prometheus"}).error,
            "uma regions: unknown option '--prometheus'");
}

}  // namespace
}  // namespace uma::cli
