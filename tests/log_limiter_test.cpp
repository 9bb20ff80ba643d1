// uma::log_limiter (sys/log_limiter.hpp): at most so many lines a second, and the next line
// written says how many were left out (issue 35: floods grew uma serve's log by a line each).

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include <uma/sys/log_limiter.hpp>

namespace uma {
namespace {

using namespace std::chrono_literals;

TEST(log_limiter, WritesAtMostItsLinesASecondAndTheNextSaysHowManyWereLeftOut) {
  std::vector<std::string> written;
  log_limiter limit([&](const std::string& line) { written.push_back(line); }, 3);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i)
    limit.write("line " + std::to_string(i), t0 + std::chrono::milliseconds(i * 50));
  ASSERT_EQ(written, (std::vector<std::string>{"line 0", "line 1", "line 2"}));
  limit.write("later", t0 + 1s);
  ASSERT_EQ(written.size(), 4u);
  EXPECT_EQ(written.back(), "later (and 7 more such lines left out of the log)");
  limit.write("again", t0 + 1s + 10ms);
  EXPECT_EQ(written.back(), "again");  // the count was said once
}

}  // namespace
}  // namespace uma
