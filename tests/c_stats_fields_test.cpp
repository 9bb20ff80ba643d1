// The C ABI's stats JSON (uma_stats_json) has every field of the stats table
// (memory/stats_fields.hpp) under its name; the struct's members are checked against the table
// at compile time (actors/c/c_stats.cpp). Linked to libuma_c only, as a C ABI user is.

#include <gtest/gtest.h>

#include <string>

#include <boost/json/parse.hpp>

#include <uma/c/uma.h>
#include <uma/memory/stats_fields.hpp>

namespace {

TEST(CStatsFields, JsonHasEveryFieldOfTheTable) {
  uma_config config;
  uma_config_init(&config);
  config.backend = UMA_BACKEND_HOST;
  uma_allocator* allocator = nullptr;
  ASSERT_EQ(uma_create(&config, &allocator), UMA_OK);
  size_t needed = 0;
  ASSERT_EQ(uma_stats_json(allocator, nullptr, 0, &needed), UMA_ERR_BUFFER_TOO_SMALL);
  std::string json(needed, '\0');
  ASSERT_EQ(uma_stats_json(allocator, json.data(), json.size(), &needed), UMA_OK);
  json.resize(needed - 1);
  uma_destroy(allocator);
  const auto doc = boost::json::parse(json).as_object();
  uma::for_each_stats_field([&](const auto& f) {
    EXPECT_TRUE(doc.contains(f.name)) << "uma_stats_json lacks " << f.name << ":\n" << json;
  });
  EXPECT_TRUE(doc.contains("total_failures"));
  EXPECT_TRUE(doc.contains("cache"));
}

}  // namespace
