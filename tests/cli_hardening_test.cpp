// `uma serve`'s hardening flags (tools/cli_hardening.cpp): values, the bind policy, the
// operator key file.

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "support/actor_fixture.hpp"
#include "tools/cli_hardening.hpp"

namespace uma::cli {
namespace {

options with(std::vector<std::pair<std::string, std::string>> flags) {
  options o;
  o.hardening = std::move(flags);
  return o;
}

TEST(CliHardening, FlagsAreReadAndBadValuesNamed) {
  const auto h = parse_hardening(with({{"--tenant-quota", "1048576"},
                                       {"--idle-timeout", "0"},
                                       {"--operator-cn", "uma operator"},
                                       {"--tls-cert", "c.pem"}}));
  EXPECT_EQ(h.tenant_quota_bytes, 1048576u);
  EXPECT_EQ(h.idle_timeout.count(), 0);
  EXPECT_EQ(h.operator_names, std::vector<std::string>{"uma operator"});
  EXPECT_EQ(h.tls.certificate, "c.pem");
  UMA_EXPECT_ERROR(static_cast<void>(parse_hardening(with({{"--tenant-quota", "-1"}}))),
                   errc::invalid_argument, "--tenant-quota needs a number from 1 to");
  UMA_EXPECT_ERROR(static_cast<void>(parse_hardening(with({{"--idle-timeout", "604801"}}))),
                   errc::invalid_argument, "--idle-timeout needs a number from 0 to 604800");
  UMA_EXPECT_ERROR(static_cast<void>(parse_hardening(with({{"--operator-cn", ""}}))),
                   errc::invalid_argument, "--operator-cn needs a value");
}

TEST(CliHardening, ConnectionCapsDefaultToSixteenAndThirtyTwoAndRefuseZeroOrGarbage) {
  const auto defaults = parse_hardening(with({}));
  EXPECT_EQ(defaults.max_connections_per_identity, 16u);
  EXPECT_EQ(defaults.max_connections_per_address, 32u);
  const auto h = parse_hardening(
      with({{"--max-connections-per-identity", "4"}, {"--max-connections-per-address", "65536"}}));
  EXPECT_EQ(h.max_connections_per_identity, 4u);
  EXPECT_EQ(h.max_connections_per_address, 65536u);
  for (const char* flag : {"--max-connections-per-identity", "--max-connections-per-address"})
    for (const char* bad : {"0", "-3", "65537", "8x", "", "99999999999999999999"})
      UMA_EXPECT_ERROR(static_cast<void>(parse_hardening(with({{flag, bad}}))),
                       errc::invalid_argument,
                       std::string(flag) + " needs a number from 1 to 65536, not '" + bad + "'");
}

TEST(CliHardening, TcpNeedsMutualTlsAndANonLoopbackBindIsWarnedAbout) {
  options local;
  EXPECT_EQ(check_bind_policy(local, {}), "");  // the Unix socket only
  options tcp;
  tcp.port = 0;
  // Only the policy runs here: nothing is bound.
  UMA_EXPECT_ERROR(static_cast<void>(check_bind_policy(tcp, {})), errc::invalid_argument,
                   "--port listens on TCP, which uma serve does only with mutual TLS");
  hardening_options tls;
  tls.tls = {"c.pem", "c.key", "ca.pem"};
  EXPECT_EQ(check_bind_policy(tcp, tls), "");
  tcp.bind = "0.0.0.0";
  EXPECT_NE(check_bind_policy(tcp, tls).find("not a loopback address"), std::string::npos);
}

TEST(CliHardening, RefusedFlagsAndTcpWithoutTlsAreUsageComplaints) {
  auto serve = with({{"--tenant-quota", "-1"}});
  serve.what = command::serve;
  EXPECT_NE(hardening_complaint(serve).find("--tenant-quota needs a number from 1 to"),
            std::string::npos);
  serve = with({});
  serve.what = command::serve;
  serve.port = 0;
  EXPECT_NE(hardening_complaint(serve).find(
                "--port listens on TCP, which uma serve does only with mutual TLS"),
            std::string::npos);
  serve = with({{"--tls-cert", "c.pem"}, {"--tls-key", "c.key"}, {"--tls-ca", "ca.pem"}});
  serve.what = command::serve;
  serve.port = 0;
  serve.bind = "0.0.0.0";
  EXPECT_EQ(hardening_complaint(serve), "");  // a warning when serve starts, not a refusal
}

TEST(CliHardening, AServersBackendNameReachesTheTerminalWithItsEscapesEscaped) {
  allocator_stats impostor;
  impostor.backend = "cuda\x1b]0;owned\x07\x1b[2J\n";
  const auto shown = printable(impostor);
  EXPECT_EQ(shown.backend, "cuda\\x1b]0;owned\\x07\\x1b[2J\\n");
  const auto text = to_string(shown);
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  EXPECT_EQ(printable(allocator_stats{.backend = "cuda"}).backend, "cuda");  // uma's own: as is
}

}  // namespace
}  // namespace uma::cli
