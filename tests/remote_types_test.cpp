// The remote-safe interface's types cross a process boundary: each must survive CAF 0.17's
// binary serialization field for field, and a message carrying it must deserialize by its
// registered name (as the middleman does it).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/message.hpp>

#include <uma/actors/remote/detail/remote_checks.hpp>
#include <uma/actors/remote/remote_gateway.hpp>
#include <uma/messages/error_category.hpp>
#include <uma/messages/register_types.hpp>
#include <uma/messages/remote_interface.hpp>
#include "support/actor_fixture.hpp"

namespace uma {
namespace {

class remote_types : public ::testing::Test {
 protected:
  template <class T>
  T round_trip(T x) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys_, buf};
    EXPECT_FALSE(sink(x)) << "serializing";
    T y{};
    caf::binary_deserializer source{sys_, buf};
    EXPECT_FALSE(source(y)) << "deserializing";
    return y;
  }

  /// Serializes a message holding `x` and reads it back through the type registry.
  template <class T>
  caf::message message_round_trip(T x) {
    auto msg = caf::make_message(std::move(x));
    std::vector<char> buf;
    caf::binary_serializer sink{sys_, buf};
    auto err = sink(msg);
    EXPECT_FALSE(err) << "serializing: " << sys_.render(err);
    caf::message back;
    caf::binary_deserializer source{sys_, buf};
    err = source(back);
    EXPECT_FALSE(err) << "deserializing: " << sys_.render(err);
    return back;
  }

  static remote_attributes sample_attributes() {
    remote_attributes a;
    a.read_mostly = true;
    a.has_preferred_location = true;
    a.preferred_location = location::device(1);
    a.accessed_by = {location::device(0), location::device(3)};
    a.has_last_prefetch_location = true;
    a.last_prefetch_location = location::host_numa(2);
    return a;
  }

  static remote_stats sample_stats() {
    remote_stats s;
    s.allocator.backend = "host";
    s.allocator.generation = 3;
    s.allocator.quota_bytes = 1 << 30;
    s.allocator.live_bytes = 12288;
    s.allocator.live_leases = 2;
    s.allocator.failures[static_cast<std::size_t>(errc::invalid_argument)] = 7;
    s.restarts = 2;
    s.supervisor = supervisor_state::restarting;
    s.sessions = 4;
    s.sessions_lost = 1;
    s.leases = 5;
    s.leased_bytes = 4096;
    return s;
  }

  /// A snapshot with a region of each kind of last prefetch (none, one) and two events.
  static remote_snapshot sample_snapshot() {
    remote_snapshot s;
    s.taken_at_ns = 1'700'000'000'000'000'000;
    s.generation = 2;
    s.backend = "host";
    s.stats = sample_stats().allocator;
    s.regions = {{region_info{1, 2, 4096, "weights", attach_flag::global, 1, 0, 12},
                  region_policy::slab, "read_mostly", true, location::device(1), 3},
                 {region_info{2, 2, 64, "", attach_flag::host, 2, 1, 0}, region_policy::direct,
                  "none", false, location::host(), 0}};
    s.events = {{100, event_kind::allocate, 2, 1, 4096, "weights", ""},
                {200, event_kind::restart, 2, 0, 0, "", "generation 1 -> 2"}};
    s.events_dropped = 5;
    s.event_capacity = 4096;
    return s;
  }

  test::uma_config cfg_;
  caf::actor_system sys_{cfg_};
};

TEST_F(remote_types, EveryFieldSurvivesSerialization) {
  EXPECT_EQ(round_trip(region_handle{7, 2}), (region_handle{7, 2}));
  const session_key key{3, 0x0123456789abcdefull, 0xfedcba9876543210ull};
  EXPECT_EQ(round_trip(key), key);
  const operator_key op{0xfedcba9876543210ull, 42};
  EXPECT_EQ(round_trip(op), op);
  const remote_allocate_request alloc{4096, 512, attach_flag::host, "weights"};
  EXPECT_EQ(round_trip(alloc), alloc);
  const remote_prefetch_request prefetch{
      {{1, 1}, {2, 1}}, {location::device(0), location::host()}, completion::complete};
  EXPECT_EQ(round_trip(prefetch), prefetch);
  const remote_discard_request discard{{{3, 2}}, completion::complete};
  EXPECT_EQ(round_trip(discard), discard);
  const remote_advise_request advise{{{4, 1}}, advice::set_accessed_by, location::device(2)};
  EXPECT_EQ(round_trip(advise), advise);
  const remote_op_result result{2, 8192, true, 1};
  EXPECT_EQ(round_trip(result), result);
  EXPECT_EQ(round_trip(sample_attributes()), sample_attributes());
  EXPECT_EQ(round_trip(sample_stats()), sample_stats());
  remote_region_info row;
  row.region = region_info{9, 2, 65536, "batch", attach_flag::global, 1, 0, 1500};
  row.session = 3;
  row.attributes_known = true;
  row.attributes = sample_attributes();
  EXPECT_EQ(round_trip(row), row);
  const auto page = round_trip(region_page{256, 64});
  EXPECT_EQ(page.start, 256u);
  EXPECT_EQ(page.count, 64u);
  const remote_region_page rows{{row, row}, 300};
  EXPECT_EQ(round_trip(rows), rows);
  EXPECT_EQ(round_trip(sample_snapshot()), sample_snapshot());
  const remote_access_plan plan{
      {{5, 1}, {6, 1}}, 1, access_mode::write, residency_policy::remote_map, completion::complete};
  EXPECT_EQ(round_trip(plan), plan);
  const residency_result moves{1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(round_trip(moves), moves);
  const auto sent = message_round_trip(plan);
  ASSERT_TRUE(sent.match_element<remote_access_plan>(0));
  EXPECT_EQ(sent.get_as<remote_access_plan>(0), plan);
  const auto handles = message_round_trip(std::vector<region_handle>{{8, 2}});
  ASSERT_TRUE(handles.match_element<std::vector<region_handle>>(0));
}

TEST_F(remote_types, MessagesDeserializeByTheirRegisteredNames) {
  const auto stats = message_round_trip(sample_stats());
  ASSERT_TRUE(stats.match_element<remote_stats>(0));
  EXPECT_EQ(stats.get_as<remote_stats>(0), sample_stats());
  const std::vector<remote_region_info> rows(2);
  const auto table = message_round_trip(rows);
  ASSERT_TRUE(table.match_element<std::vector<remote_region_info>>(0));
  EXPECT_EQ(table.get_as<std::vector<remote_region_info>>(0).size(), 2u);
  const auto snap = message_round_trip(sample_snapshot());
  ASSERT_TRUE(snap.match_element<remote_snapshot>(0));
  EXPECT_EQ(snap.get_as<remote_snapshot>(0), sample_snapshot());
  const auto request = message_round_trip(remote_advise_request{{{4, 1}}, advice::set_read_mostly});
  ASSERT_TRUE(request.match_element<remote_advise_request>(0));
  EXPECT_EQ(request.get_as<remote_advise_request>(0).regions.front(), (region_handle{4, 1}));
}

TEST_F(remote_types, OperatorKeysTravelAsHexAndNothingElseParses) {
  const operator_key k{0x0123456789abcdefull, 0xfedcba9876543210ull};
  EXPECT_EQ(to_hex(k), "0123456789abcdeffedcba9876543210");
  EXPECT_EQ(parse_operator_key(to_hex(k) + "\n"), k);
  EXPECT_FALSE(parse_operator_key("0123456789abcdeffedcba987654321"));   // 31 digits
  EXPECT_FALSE(parse_operator_key("0123456789ABCDEFFEDCBA9876543210"));  // upper case
  EXPECT_FALSE(parse_operator_key("0123456789abcdeffedcba987654321g"));  // not hex
  EXPECT_NE(make_operator_key(), make_operator_key());
  EXPECT_FALSE(make_operator_key().empty());
}

TEST_F(remote_types, AUmaErrorCrossesWithCodeAndText) {
  const auto back =
      message_round_trip(make_caf_error(errc::not_supported, "export_ipc: region 1 of ..."));
  ASSERT_TRUE(back.match_element<caf::error>(0));
  const auto e = to_uma_error(back.get_as<caf::error>(0));
  EXPECT_EQ(e.code(), errc::not_supported);
  EXPECT_STREQ(e.what(), "export_ipc: region 1 of ...");
}

TEST_F(remote_types, TheInterfaceNamesOnlyRegisteredTypes) {
  // A remote_actor lookup compares these strings; an unregistered type shows as
  // "<invalid-type[typeid ...]>" (and would not serialize).
  std::string all;
  for (const auto& signature : sys_.message_types<remote_allocator_actor>()) {
    EXPECT_EQ(signature.find("invalid-type"), std::string::npos) << signature;
    all += signature + "\n";
  }
  EXPECT_NE(all.find("caf::replies_to<stats>::with<uma::remote_stats>"), std::string::npos) << all;
  EXPECT_NE(all.find("uma::region_page>::with<uma::remote_region_page>"), std::string::npos) << all;
  EXPECT_NE(all.find("caf::replies_to<snapshot,uma::operator_key>::with<uma::remote_snapshot>"),
            std::string::npos)
      << all;
}

TEST_F(remote_types, AttributesConvertBothWays) {
  range_attributes local;
  local.read_mostly = true;
  local.preferred_location = location::device(0);
  local.accessed_by = {location::device(1)};
  EXPECT_EQ(to_local(to_remote(local)), local);
  EXPECT_FALSE(to_remote(local).has_last_prefetch_location);
}

TEST_F(remote_types, SnapshotsConvertBothWaysAndKeepTheLastPrefetch) {
  allocator_snapshot local = to_local(sample_snapshot());
  ASSERT_EQ(local.regions.size(), 2u);
  EXPECT_EQ(local.regions[0].last_prefetch, location::device(1));
  EXPECT_FALSE(local.regions[1].last_prefetch);
  EXPECT_EQ(local.regions[0].policy, region_policy::slab);
  EXPECT_EQ(local.events, sample_snapshot().events);
  EXPECT_EQ(local.events_dropped, 5u);
  // Back to the wire: everything but the sessions, which a local snapshot does not know.
  auto expected = sample_snapshot();
  expected.regions[0].session = 0;
  EXPECT_EQ(to_remote(local), expected);
}

TEST_F(remote_types, ASnapshotWithAValueOutOfRangeIsRefusedNamingIt) {
  EXPECT_FALSE(detail::check_snapshot(sample_snapshot()));
  const auto refused = [](remote_snapshot s) {
    const auto r = detail::check_snapshot(s);
    return r ? r->message : std::string("accepted");
  };
  auto s = sample_snapshot();
  s.regions[1].policy = static_cast<region_policy>(7);
  EXPECT_EQ(refused(s), "snapshot: region 2 has policy 7, not 0 (direct), 2 (slab) or 3 (block)");
  s.regions[1].policy = static_cast<region_policy>(1);  // retired: a block of the old pool
  EXPECT_EQ(refused(s), "snapshot: region 2 has policy 1, not 0 (direct), 2 (slab) or 3 (block)");
  s = sample_snapshot();
  s.regions[0].info.attach = static_cast<attach_flag>(0);
  EXPECT_EQ(refused(s), "snapshot: region 1 has attach flag 0, out of range (1: global, 2: host)");
  s = sample_snapshot();
  s.regions[0].last_prefetch = location{static_cast<location::kind>(9), 0};
  EXPECT_EQ(refused(s),
            "snapshot: region 1 has a last prefetch location of kind 9, out of range (1 to 4)");
  s.regions[0].has_last_prefetch = false;  // a value that is not there is not looked at
  EXPECT_EQ(refused(s), "accepted");
  s = sample_snapshot();
  s.events[1].kind = static_cast<event_kind>(200);
  EXPECT_EQ(refused(s), "snapshot: event 1 has kind 200, out of range (0 to 6)");
}

}  // namespace
}  // namespace uma
