// One field table per stats struct (memory/stats_fields.hpp): every renderer shows every field of
// it. A stats value with a distinct sentinel in every field goes through each renderer, and each
// field's name and sentinel must come out (a renderer that missed a field fails here by name).

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <uma/actors/metrics/prometheus_text.hpp>
#include <uma/memory/stats_fields.hpp>
#include <uma/messages/inspect.hpp>
#include "tools/stats_format.hpp"

namespace uma {
namespace {

/// Every field a different value: numbers 7001, 7002, ... in table order, a ratio, a backend name.
allocator_stats sentinels() {
  allocator_stats s;
  std::uint64_t next = 7001;
  for_each_stats_field([&](const auto& f) {
    using type = stats_field_type<decltype(f)>;
    auto& value = s.*f.member;
    if constexpr (std::is_same_v<type, std::string>)
      value = "sentinel-backend";
    else if constexpr (std::is_same_v<type, double>)
      value = 0.375;
    else if constexpr (std::is_same_v<type, std::uint64_t>)
      value = next++;
    else
      for (std::size_t i = 1; i < errc_slots; ++i)
        value[i] = 9000 + i;
  });
  return s;
}

/// The sentinel of a field as its renderers print it.
template <class Field>
std::string sentinel_text(const allocator_stats& s, const Field& f) {
  using type = stats_field_type<Field>;
  const auto& value = s.*f.member;
  if constexpr (std::is_same_v<type, std::string>)
    return value;
  else if constexpr (std::is_same_v<type, double>)
    return "0.375";
  else if constexpr (std::is_same_v<type, std::uint64_t>)
    return std::to_string(value);
  else
    return std::to_string(value[1]);  // the first error code's
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(StatsFields, JsonHasEveryFieldUnderItsNameWithItsValue) {
  const auto s = sentinels();
  const auto json = cli::to_json(s);
  const auto doc = boost::json::parse(json).as_object();
  for_each_stats_field([&](const auto& f) {
    ASSERT_TRUE(doc.contains(f.name)) << "uma stats --json lacks " << f.name << ":\n" << json;
    using type = stats_field_type<decltype(f)>;
    const auto& value = s.*f.member;
    const auto& got = doc.at(f.name);
    if constexpr (std::is_same_v<type, std::array<std::uint64_t, errc_slots>>)
      EXPECT_EQ(got.at("out_of_memory").template to_number<std::uint64_t>(), value[1]) << f.name;
    else
      EXPECT_EQ(got, boost::json::value_from(value)) << f.name << ": " << got;
  });
  EXPECT_EQ(doc.size(), allocator_stats_field_count + 1) << "the fields and total_failures";
}

TEST(StatsFields, TextNamesEveryFieldWithItsValue) {
  const auto s = sentinels();
  const auto text = to_string(s);
  for_each_stats_field([&](const auto& f) {
    std::string expected = std::string(f.name) + ": " + sentinel_text(s, f).substr(0, 4);
    if (f.kind == stat_kind::identity)
      expected = sentinel_text(s, f);
    else if (f.name == "failures")
      expected = "failures.out_of_memory: " + sentinel_text(s, f);
    EXPECT_TRUE(contains(text, expected)) << f.name << " in\n" << text;
  });
}

TEST(StatsFields, PrometheusHasAFamilyPerFieldAndTheIdentityAsLabels) {
  const auto s = sentinels();
  const auto text = to_prometheus(s);
  for_each_stats_field([&](const auto& f) {
    if (f.kind == stat_kind::identity) {
      EXPECT_TRUE(contains(text, std::string(f.name) + "=\"" + sentinel_text(s, f) + "\""))
          << f.name << " is no label:\n"
          << text;
      return;
    }
    const std::string type = f.kind == stat_kind::counter ? " counter" : " gauge";
    EXPECT_TRUE(contains(text, "# TYPE " + std::string(f.metric) + type)) << f.name << ":\n"
                                                                          << text;
    EXPECT_TRUE(contains(text, "# HELP " + std::string(f.metric) + " " + std::string(f.help)))
        << f.name;
    EXPECT_TRUE(contains(text, "} " + sentinel_text(s, f) + "\n")) << f.name << ":\n" << text;
    if (f.kind == stat_kind::counter) {
      EXPECT_TRUE(f.metric.ends_with("_total")) << f.metric;
    }
  });
}

TEST(StatsFields, CafInspectCarriesEveryField) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  const auto s = sentinels();
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  auto copy = s;
  ASSERT_FALSE(sink(copy));
  allocator_stats back;
  caf::binary_deserializer source{sys, buf};
  ASSERT_FALSE(source(back));
  for_each_stats_field([&](const auto& f) {
    EXPECT_TRUE(back.*f.member == s.*f.member) << f.name << " did not survive serialization";
  });
}

/// The row docs/cli.md's "Stats fields" table must have for `f`.
template <class Field>
std::string doc_row(const Field& f) {
  std::string metric = f.name == "failures" ? "`uma_failures_total{code=\"...\"}`"
                       : f.metric.empty()   ? "label of every sample"
                                            : "`" + std::string(f.metric) + "`";
  const char* kind = f.kind == stat_kind::identity  ? "identity"
                     : f.kind == stat_kind::counter ? "counter"
                                                    : "gauge";
  std::ostringstream row;
  row << "| " << f.name << " | " << metric << " | " << kind << " | " << f.unit << " | " << f.help
      << " |";
  return row.str();
}

TEST(StatsFields, DocsTableMatchesTheFieldTable) {
  std::ifstream doc(UMA_SOURCE_DIR "/docs/cli.md");
  ASSERT_TRUE(doc) << "cannot read docs/cli.md";
  std::vector<std::string> rows;
  std::string line;
  bool in_table = false;
  while (std::getline(doc, line)) {
    if (line.starts_with("<!-- stats-fields-table"))
      in_table = true;
    else if (in_table && !line.starts_with("|"))
      break;
    else if (in_table && !line.starts_with("| field |") && !line.starts_with("|---"))
      rows.push_back(line);
  }
  ASSERT_TRUE(in_table) << "docs/cli.md has no <!-- stats-fields-table --> marker";
  std::vector<std::string> expected;
  for_each_stats_field([&](const auto& f) { expected.push_back(doc_row(f)); });
  const std::set<std::string> have(rows.begin(), rows.end());
  const std::set<std::string> want(expected.begin(), expected.end());
  for (const auto& row : expected)
    EXPECT_TRUE(have.contains(row)) << "docs/cli.md's stats table lacks (or has stale):\n" << row;
  for (const auto& row : rows)
    EXPECT_TRUE(want.contains(row)) << "docs/cli.md's stats table has a row no field gives:\n"
                                    << row;
  EXPECT_EQ(rows, expected) << "docs/cli.md's stats table is not in the table's order";
}

}  // namespace
}  // namespace uma
