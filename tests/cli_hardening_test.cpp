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
                                       {"--max-payload", "65536"},
                                       {"--tls-cert", "c.pem"}}));
  EXPECT_EQ(h.tenant_quota_bytes, 1048576u);
  EXPECT_EQ(h.idle_timeout.count(), 0);
  EXPECT_EQ(h.max_payload, 65536u);
  EXPECT_EQ(h.tls.certificate, "c.pem");
  UMA_EXPECT_ERROR(static_cast<void>(parse_hardening(with({{"--tenant-quota", "-1"}}))),
                   errc::invalid_argument, "--tenant-quota needs a number from 1 to");
  UMA_EXPECT_ERROR(static_cast<void>(parse_hardening(with({{"--max-payload", "12"}}))),
                   errc::invalid_argument, "--max-payload needs a number from 1024");
}

TEST(CliHardening, ANonLoopbackBindNeedsTlsOrInsecure) {
  EXPECT_EQ(check_bind_policy("127.0.0.1", {}), "");
  // Only the policy runs here: nothing is bound.
  UMA_EXPECT_ERROR(static_cast<void>(check_bind_policy("0.0.0.0", {})), errc::invalid_argument,
                   "refusing to listen on 0.0.0.0, which is not a loopback address, without TLS");
  hardening_options insecure;
  insecure.insecure = true;
  EXPECT_NE(check_bind_policy("0.0.0.0", insecure).find("WARNING"), std::string::npos);
  hardening_options tls;
  tls.tls.certificate = "c.pem";
  EXPECT_EQ(check_bind_policy("0.0.0.0", tls), "");
}

TEST(CliHardening, TheOperatorKeyFileIsOwnerOnlyAndReadsBack) {
  char tmpl[] = "/tmp/uma-key-test-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const auto path = dir + "/operator.key";
  const operator_key key{0x1234, 0x5678};
  write_operator_key(path, key);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(read_operator_key(path), key);
  UMA_EXPECT_ERROR(static_cast<void>(read_operator_key(dir + "/none")), errc::invalid_argument,
                   "no operator key there");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace uma::cli
