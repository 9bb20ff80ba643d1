// A serving node's arbiter in `uma snapshot --connect`'s forms (tools/arbiter_json.hpp,
// tools/snapshot_page.hpp): the report under "arbiter" in the JSON, the page's "Arbiter" section
// with every text the server sent kept data, and no section without a report.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

#include <boost/json/object.hpp>

#include <uma/actors/remote/arbiter/arbiter_types.hpp>
#include <uma/memory/allocator_snapshot.hpp>
#include "tools/arbiter_json.hpp"
#include "tools/snapshot_json.hpp"
#include "tools/snapshot_page.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;

/// A tenant name a hostile member could choose (printable ASCII without '/').
constexpr const char* hostile_tenant = "uid 1000/<script>alert(1)<b>&";

/// One device of 4 GiB with one member of `hostile_tenant`, and the decision that admitted it.
arbiter_report one_member_report() {
  arbiter_member_row m;
  m.member = 7;
  m.tenant = hostile_tenant;
  m.claim = {.device = 0, .min_bytes = 4096, .wanted_bytes = 1 << 20, .priority = 5, .weight = 2};
  m.granted_bytes = m.held_bytes = 1 << 20;
  m.resident_bytes = 1 << 19;
  m.state = "active";
  m.shrinks = 1;
  m.slowest_shrink = 12ms;
  arbiter_report r;
  r.devices.push_back(
      {.device = 0, .total_bytes = 4ull << 30, .held_bytes = 1 << 20, .members = {m}});
  r.decisions.push_back(
      {.at = 31ms,
       .member = 7,
       .tenant = hostile_tenant,
       .device = 0,
       .from_bytes = 0,
       .to_bytes = 1 << 20,
       .why = std::string("member 7 (") + hostile_tenant + ") joined with priority 5"});
  r.members = 1;
  return r;
}

boost::json::object snapshot_with_arbiter() {
  auto data = cli::to_json_object(allocator_snapshot{});
  data["arbiter"] = cli::to_json_object(one_member_report());
  return data;
}

TEST(snapshot_arbiter, JsonCarriesTheReportWithoutServer) {
  const auto a = snapshot_with_arbiter().at("arbiter").as_object();
  EXPECT_FALSE(a.contains("server"));
  EXPECT_EQ(a.at("members").to_number<std::uint64_t>(), 1u);
  const auto& device = a.at("devices").as_array().at(0).as_object();
  EXPECT_EQ(device.at("total_bytes").to_number<std::uint64_t>(), 4ull << 30);
  const auto& member = device.at("members").as_array().at(0).as_object();
  EXPECT_EQ(member.at("tenant").as_string(), hostile_tenant);
  EXPECT_EQ(member.at("min_bytes").to_number<std::uint64_t>(), 4096u);
  EXPECT_EQ(member.at("slowest_shrink_ms").to_number<std::int64_t>(), 12);
  const auto& decision = a.at("decisions").as_array().at(0).as_object();
  EXPECT_EQ(decision.at("at_ms").to_number<std::int64_t>(), 31);
  EXPECT_EQ(decision.at("to_bytes").to_number<std::uint64_t>(), 1u << 20);
}

TEST(snapshot_arbiter, PrintableEscapesTheServersControlCharacters) {
  auto r = one_member_report();
  r.decisions[0].why = "evicted\x1b[2J";
  const auto json = cli::to_json_object(cli::printable(r));
  EXPECT_EQ(json.at("decisions").as_array().at(0).at("why").as_string(), "evicted\\x1b[2J");
}

TEST(snapshot_arbiter, PageWithAReportHasTheSectionAndKeepsItsTextData) {
  const auto page = cli::snapshot_page(snapshot_with_arbiter());
  EXPECT_NE(page.find("<h2>Arbiter <span id=\"arbiter-note\">"), std::string::npos);
  EXPECT_NE(page.find("<table id=\"arbiter-members\">"), std::string::npos);
  EXPECT_NE(page.find("<table id=\"arbiter-decisions\">"), std::string::npos);
  // The tenant, in the member row and in the decision's why, is embedded JSON with <, > and &
  // escaped: it cannot open an element or end the data's <script>.
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  EXPECT_EQ(page.find("<b>&"), std::string::npos);
  EXPECT_NE(page.find("(uid 1000/\\u003cscript\\u003ealert(1)\\u003cb\\u003e\\u0026) joined"),
            std::string::npos);
}

TEST(snapshot_arbiter, PageWithoutAReportHasNoSection) {
  const auto page = cli::snapshot_page(cli::to_json_object(allocator_snapshot{}));
  EXPECT_EQ(page.find("<h2>Arbiter"), std::string::npos);
  EXPECT_EQ(page.find("id=\"arbiter-"), std::string::npos);
  EXPECT_NE(page.find("<h2>Events"), std::string::npos);
}

}  // namespace
}  // namespace uma
