// detail::generation_log: the allocator supervisor's record of each incarnation, written from
// the supervisor (start, end) and from the incarnation's own stop callback (final counters).

#include <gtest/gtest.h>

#include <thread>

#include <uma/actors/detail/generation_log.hpp>

namespace uma::detail {
namespace {

TEST(generation_log, EachGenerationHasOneRecordFromItsStartToItsEnd) {
  generation_log log;
  log.started(1);
  allocator_stats final_stats;
  final_stats.live_bytes = 4096;
  stop_report report;
  report.regions_freed = 3;
  report.regions_leaked = 1;
  log.stopped(1, final_stats, report);
  log.ended(1, "injected fault");
  log.started(2);
  const auto records = log.records();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].generation, 1u);
  EXPECT_FALSE(records[0].alive);
  EXPECT_EQ(records[0].final_stats.live_bytes, 4096u);
  EXPECT_EQ(records[0].regions_freed, 3u);
  EXPECT_EQ(records[0].regions_leaked, 1u);
  EXPECT_EQ(records[0].exit_reason, "injected fault");
  EXPECT_EQ(records[1].generation, 2u);
  EXPECT_TRUE(records[1].alive);
  EXPECT_TRUE(records[1].exit_reason.empty());
}

TEST(generation_log, AStopCallbackOnAnotherThreadKeepsWhatTheSupervisorWrote) {
  // The incarnation's post_stop writes its counters on its own thread while the supervisor
  // records the next start: neither loses the other's fields.
  generation_log log;
  log.started(1);
  std::thread post_stop([&] {
    stop_report report;
    report.regions_freed = 7;
    log.stopped(1, allocator_stats{}, report);
  });
  log.started(2);
  post_stop.join();
  log.ended(1, "restart requested");
  const auto records = log.records();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].regions_freed, 7u);
  EXPECT_EQ(records[0].exit_reason, "restart requested");
  EXPECT_TRUE(records[1].alive);
}

}  // namespace
}  // namespace uma::detail
