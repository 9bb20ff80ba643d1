#include <gtest/gtest.h>

#include <string>

#include <boost/json/parse.hpp>

#include <uma/actors/metrics/prometheus_text.hpp>
#include "tools/stats_format.hpp"

namespace uma::cli {
namespace {

/// A stats value with a distinct number in every field, so a swapped field shows.
allocator_stats sample() {
  allocator_stats s;
  s.backend = "host";
  s.generation = 3;
  s.quota_bytes = 1000;
  s.allocations = 11;
  s.releases = 12;
  s.live_regions = 13;
  s.live_bytes = 14;
  s.peak_bytes = 15;
  s.total_bytes_allocated = 16;
  s.prefetches = 17;
  s.prefetch_bytes = 18;
  s.advises = 19;
  s.discards = 20;
  s.discard_bytes = 21;
  s.inert_refusals = 22;
  s.pending_jobs = 23;
  s.failures[static_cast<std::size_t>(errc::quota_exceeded)] = 2;
  s.failures[static_cast<std::size_t>(errc::invalid_argument)] = 5;
  return s;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(StatsJson, NamesEveryCounterAfterItsAllocatorStatsField) {
  const auto json = to_json(sample());
  for (const char* line :
       {"\"backend\": \"host\"", "\"generation\": 3", "\"quota_bytes\": 1000",
        "\"allocations\": 11", "\"releases\": 12", "\"live_regions\": 13", "\"live_bytes\": 14",
        "\"peak_bytes\": 15", "\"total_bytes_allocated\": 16", "\"prefetches\": 17",
        "\"prefetch_bytes\": 18", "\"advises\": 19", "\"discards\": 20", "\"discard_bytes\": 21",
        "\"inert_refusals\": 22", "\"pending_jobs\": 23", "\"total_failures\": 7"})
    EXPECT_TRUE(contains(json, line)) << "missing " << line << " in\n" << json;
}

TEST(StatsJson, ListsEveryErrorCodeUnderFailuresZerosIncluded) {
  const auto json = to_json(sample());
  EXPECT_TRUE(contains(json, "\"failures\": {\n    \"out_of_memory\": 0,\n")) << json;
  EXPECT_TRUE(contains(json, "\"quota_exceeded\": 2")) << json;
  EXPECT_TRUE(contains(json, "\"invalid_argument\": 5")) << json;
  for (std::size_t i = 1; i < errc_slots; ++i) {
    std::string key = "\"";
    key.append(to_string(static_cast<errc>(i))).append("\": ");
    EXPECT_TRUE(contains(json, key)) << to_string(static_cast<errc>(i));
  }
}

TEST(StatsJson, IsOneObjectWithoutATrailingComma) {
  const auto json = to_json(sample());
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.substr(json.size() - 2), "}\n");
  EXPECT_FALSE(contains(json, ",\n}")) << json;
  EXPECT_FALSE(contains(json, ",\n  }")) << json;
}

TEST(StatsJson, EscapesQuotesBackslashesAndControlCharactersSoItParsesBack) {
  auto s = sample();
  s.backend = "ho\"st\\x\n\x01";
  const auto json = to_json(s);
  EXPECT_TRUE(contains(json, "\"backend\": \"ho\\\"st\\\\x\\n\\u0001\"")) << json;
  const auto parsed = boost::json::parse(json);
  EXPECT_EQ(parsed.at("backend").as_string(), s.backend);
  EXPECT_EQ(parsed.at("failures").at("invalid_argument").to_number<std::uint64_t>(), 5u);
}

TEST(StatsPrometheus, GivesEveryFamilyHelpAndTypeBeforeItsSample) {
  const auto text = to_prometheus(sample());
  EXPECT_TRUE(contains(text, "# HELP uma_live_bytes ")) << text;
  EXPECT_TRUE(contains(text,
                       "# TYPE uma_live_bytes gauge\n"
                       "uma_live_bytes{backend=\"host\",generation=\"3\"} 14\n"))
      << text;
  EXPECT_TRUE(contains(text,
                       "# TYPE uma_allocations_total counter\n"
                       "uma_allocations_total{backend=\"host\",generation=\"3\"} 11\n"))
      << text;
}

TEST(StatsPrometheus, ExposesEachCounterOnceWithItsValue) {
  const auto text = to_prometheus(sample());
  const std::string labels = "{backend=\"host\",generation=\"3\"} ";
  for (const auto& [metric, value] : {std::pair{"uma_quota_bytes", 1000},
                                      {"uma_releases_total", 12},
                                      {"uma_live_regions", 13},
                                      {"uma_peak_bytes", 15},
                                      {"uma_allocated_bytes_total", 16},
                                      {"uma_prefetches_total", 17},
                                      {"uma_prefetched_bytes_total", 18},
                                      {"uma_advises_total", 19},
                                      {"uma_discards_total", 20},
                                      {"uma_discarded_bytes_total", 21},
                                      {"uma_inert_refusals_total", 22},
                                      {"uma_pending_jobs", 23}}) {
    const std::string sample_line = std::string(metric) + labels + std::to_string(value) + "\n";
    EXPECT_TRUE(contains(text, sample_line)) << "missing " << sample_line;
    EXPECT_EQ(text.find("# TYPE " + std::string(metric) + " "),
              text.rfind("# TYPE " + std::string(metric) + " "))
        << metric << " declared twice";
  }
}

TEST(StatsPrometheus, CountsFailuresPerCodeInOneFamily) {
  const auto text = to_prometheus(sample());
  EXPECT_TRUE(contains(text, "# TYPE uma_failures_total counter\n")) << text;
  EXPECT_TRUE(contains(
      text, "uma_failures_total{backend=\"host\",generation=\"3\",code=\"invalid_argument\"} 5\n"));
  EXPECT_TRUE(contains(
      text, "uma_failures_total{backend=\"host\",generation=\"3\",code=\"quota_exceeded\"} 2\n"));
  EXPECT_TRUE(contains(
      text, "uma_failures_total{backend=\"host\",generation=\"3\",code=\"out_of_memory\"} 0\n"));
}

TEST(StatsPrometheus, EndsEveryLineWithANewlineAndHasNoBlankLines) {
  const auto text = to_prometheus(sample());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_FALSE(contains(text, "\n\n"));
}

TEST(StatsPrometheus, AddsLabelAndSupervisorFamiliesWhenTheSnapshotHasThem) {
  metrics_snapshot snap{.allocator = sample()};
  EXPECT_FALSE(contains(to_prometheus(snap), "uma_label_live_bytes"));
  EXPECT_FALSE(contains(to_prometheus(snap), "uma_supervisor_"));
  snap.labels = std::vector<label_usage>{{"frames", 2, 8192}, {"we\"ird\n", 1, 4096}};
  snap.supervision =
      supervision_stats{.current_generation = 3, .restarts = 2, .state = supervisor_state::running};
  const auto text = to_prometheus(snap);
  EXPECT_TRUE(contains(text,
                       "# TYPE uma_label_live_bytes gauge\n"
                       "uma_label_live_bytes{backend=\"host\",generation=\"3\",label=\"frames\"} "
                       "8192\n"))
      << text;
  EXPECT_TRUE(contains(text, "label=\"we\\\"ird\\n\"} 4096\n")) << text;
  EXPECT_TRUE(
      contains(text, "uma_supervisor_restarts_total{backend=\"host\",generation=\"3\"} 2\n"));
  EXPECT_TRUE(contains(
      text, "uma_supervisor_state{backend=\"host\",generation=\"3\",state=\"running\"} 1\n"));
  EXPECT_TRUE(contains(
      text, "uma_supervisor_state{backend=\"host\",generation=\"3\",state=\"stopped\"} 0\n"));
}

TEST(StatsPrometheus, AddsResidencyFamiliesPerDeviceWhenTheSnapshotHasThem) {
  metrics_snapshot snap{.allocator = sample()};
  EXPECT_FALSE(contains(to_prometheus(snap), "uma_residency_"));
  residency_report r;
  r.devices = {device_residency{.memory = 80, .budget = 40, .resident = 32, .peak = 40, .held = 8},
               device_residency{.memory = 80, .budget = 0, .resident = 0, .peak = 0, .held = 0}};
  r.totals.to_device_bytes = 96;
  r.totals.to_host_bytes = 64;
  r.totals.refetches = 1;
  snap.residency = r;
  const auto text = to_prometheus(snap);
  EXPECT_TRUE(
      contains(text,
               "# TYPE uma_residency_resident_bytes gauge\n"
               "uma_residency_resident_bytes{backend=\"host\",generation=\"3\",device=\"0\"}"
               " 32\n"
               "uma_residency_resident_bytes{backend=\"host\",generation=\"3\",device=\"1\"}"
               " 0\n"))
      << text;
  EXPECT_TRUE(contains(
      text, "uma_residency_budget_bytes{backend=\"host\",generation=\"3\",device=\"0\"} 40\n"));
  EXPECT_TRUE(contains(text,
                       "# TYPE uma_residency_bytes_total counter\n"
                       "uma_residency_bytes_total{backend=\"host\",generation=\"3\","
                       "move=\"to_device\"} 96\n"
                       "uma_residency_bytes_total{backend=\"host\",generation=\"3\","
                       "move=\"to_host\"} 64\n"))
      << text;
  EXPECT_TRUE(contains(
      text, "uma_residency_moves_total{backend=\"host\",generation=\"3\",kind=\"refetch\"} 1\n"));
}

TEST(StatsPrometheus, SumsRegionsByLabelAndFoldsTheTailIntoOther) {
  std::vector<region_info> regions;
  for (const char* label : {"b", "a", "b", "c", "d"})
    regions.push_back(region_info{.bytes = 100, .label = label});
  const auto usage = usage_by_label(regions, 2);
  ASSERT_EQ(usage.size(), 3u);
  EXPECT_EQ(usage[0], (label_usage{"a", 1, 100}));
  EXPECT_EQ(usage[1], (label_usage{"b", 2, 200}));
  EXPECT_EQ(usage[2], (label_usage{"(other)", 2, 200}));
}

TEST(StatsPrometheus, EscapesLabelValues) {
  EXPECT_EQ(prometheus_escape("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  auto s = sample();
  s.backend = "x\"y";
  EXPECT_TRUE(contains(to_prometheus(s), "uma_live_bytes{backend=\"x\\\"y\",generation=\"3\"} 14"));
}

TEST(HumanBytes, UsesBinaryUnitsWithOneDecimal) {
  EXPECT_EQ(human_bytes(100), "100 bytes");
  EXPECT_EQ(human_bytes(256 * 1024), "256.0 KiB");
  EXPECT_EQ(human_bytes(3 * 1024 * 1024 / 2), "1.5 MiB");
  EXPECT_EQ(human_bytes(std::uint64_t{12} << 30), "12.0 GiB");
}

}  // namespace
}  // namespace uma::cli
