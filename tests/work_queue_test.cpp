#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "sys/work_queue.hpp"

namespace uma {
namespace {

TEST(WorkQueue, RunsJobsInPostOrderOffTheCallingThread) {
  std::vector<int> order;
  std::thread::id worker;
  {
    work_queue q;
    for (int i = 0; i < 100; ++i)
      q.post([&order, &worker, i] {
        order.push_back(i);
        worker = std::this_thread::get_id();
      });
  }  // destructor drains
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(order[i], i);
  EXPECT_NE(worker, std::this_thread::get_id());
}

TEST(WorkQueue, PostsAfterStopRunInline) {
  work_queue q;
  q.drain_and_stop();
  bool ran = false;
  q.post([&ran] { ran = true; });
  EXPECT_TRUE(ran);
  EXPECT_EQ(q.pending(), 0u);
}

TEST(WorkQueue, OnStartRunsOnTheWorkerThreadBeforeTheFirstJob) {
  std::vector<std::string> order;
  std::thread::id start_thread, job_thread;
  {
    work_queue q([&] {
      start_thread = std::this_thread::get_id();
      order.emplace_back("start");
    });
    q.post([&] {
      job_thread = std::this_thread::get_id();
      order.emplace_back("job");
    });
  }  // joined: both ran
  EXPECT_EQ(order, (std::vector<std::string>{"start", "job"}));
  EXPECT_EQ(start_thread, job_thread);
  EXPECT_NE(job_thread, std::this_thread::get_id());
}

}  // namespace
}  // namespace uma
