#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <uma/sys/work_queue.hpp>

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

TEST(WorkQueue, AJobWhoseCapturesEndTheQueueLetsItFinishCleanly) {
  // As when an allocator's last handle is captured by one of its lane's jobs: destroying the job
  // destroys the queue from the queue's own thread. What was queued behind still runs, and the
  // thread ends on its own (the old loop destroyed jobs under its lock: a deadlock).
  auto q = std::make_unique<work_queue>();
  struct ender {
    ender(std::unique_ptr<work_queue>* q, std::atomic<bool>* e) : queue(q), ended(e) {}
    ender(const ender&) = delete;
    ender& operator=(const ender&) = delete;
    std::unique_ptr<work_queue>* queue;
    std::atomic<bool>* ended;
    ~ender() {
      queue->reset();
      ended->store(true);
    }
  };
  std::atomic<bool> ended{false};
  std::atomic<int> ran{0};
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  q->post([opened] { opened.wait(); });  // holds the thread until everything is queued
  q->post([e = std::make_shared<ender>(&q, &ended)] {});
  q->post([&ran] { ++ran; });
  gate.set_value();
  for (int i = 0; i < 10'000'000 && !ended.load(); ++i)
    std::this_thread::yield();
  ASSERT_TRUE(ended.load());
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(q, nullptr);
}

TEST(WorkQueue, AnUncountedMarkerDoesNotCountItselfAsPending) {
  work_queue q;
  std::promise<std::size_t> seen;
  q.post([&q, &seen] { seen.set_value(q.pending()); }, false);
  EXPECT_EQ(seen.get_future().get(), 0u);  // a flush marker reports 0 pending when idle
  std::promise<std::size_t> counted;
  q.post([&q, &counted] { counted.set_value(q.pending()); });
  EXPECT_EQ(counted.get_future().get(), 1u);  // an ordinary job counts while it runs
}

}  // namespace
}  // namespace uma
