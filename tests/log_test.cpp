// uma::log (sys/log.hpp): levels, the replaceable sink, and a sink that throws. The concurrent
// case (threads logging while the sink is replaced) lives in log_race_test.cpp, which runs under
// TSan with the reliability tests.

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <uma/sys/log.hpp>

namespace uma {
namespace {

struct record {
  log_level level;
  std::string message;
  friend bool operator==(const record&, const record&) = default;
};

/// Installs a capturing sink and restores the default sink and level afterwards.
class log_test : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_level_ = current_log_level();
    set_log_sink([this](log_level level, std::string_view message) {
      records_.push_back({level, std::string(message)});
    });
  }
  void TearDown() override {
    set_log_sink({});
    set_log_level(previous_level_);
  }

  std::vector<record> records_;
  log_level previous_level_ = log_level::info;
};

TEST(log_defaults, the_default_level_is_info) {
  EXPECT_EQ(current_log_level(), log_level::info);
  EXPECT_FALSE(log_enabled(log_level::debug));
  EXPECT_TRUE(log_enabled(log_level::info));
  EXPECT_TRUE(log_enabled(log_level::error));
}

TEST(log_defaults, levels_have_names) {
  EXPECT_EQ(to_string(log_level::debug), "debug");
  EXPECT_EQ(to_string(log_level::info), "info");
  EXPECT_EQ(to_string(log_level::warning), "warning");
  EXPECT_EQ(to_string(log_level::error), "error");
}

TEST_F(log_test, a_replaced_sink_receives_the_level_and_the_message) {
  log(log_level::warning, "a region leaked");
  EXPECT_EQ(records_, (std::vector<record>{{log_level::warning, "a region leaked"}}));
}

TEST_F(log_test, messages_below_the_level_are_dropped) {
  set_log_level(log_level::warning);
  log(log_level::info, "dropped");
  log(log_level::error, "kept");
  EXPECT_EQ(records_, (std::vector<record>{{log_level::error, "kept"}}));
  set_log_level(log_level::debug);
  log(log_level::debug, "now kept");
  EXPECT_EQ(records_.size(), 2u);
}

TEST_F(log_test, set_log_sink_returns_the_sink_it_replaced) {
  auto mine = set_log_sink({});
  ASSERT_TRUE(mine);
  mine(log_level::info, "through the returned sink");
  EXPECT_EQ(records_, (std::vector<record>{{log_level::info, "through the returned sink"}}));
  EXPECT_FALSE(set_log_sink(std::move(mine)));  // the default sink is reported as empty
}

TEST_F(log_test, an_empty_sink_restores_the_default) {
  static_cast<void>(set_log_sink({}));
  ::testing::internal::CaptureStderr();
  log(log_level::error, "to stderr");
  const std::string written = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(records_.empty());
  // The default sink's line format is documented in sys/log.hpp: it is the behaviour here.
  EXPECT_EQ(written, "uma: error: to stderr\n");
}

TEST_F(log_test, an_exception_thrown_by_the_sink_is_swallowed) {
  set_log_sink([](log_level, std::string_view) { throw std::runtime_error("sink failed"); });
  EXPECT_NO_THROW(log(log_level::error, "lost"));
}

}  // namespace
}  // namespace uma
