// uma::log from many threads while another thread replaces the sink (sys/log.hpp promises that a
// message goes to either sink, never to a destroyed one). Part of uma_reliability_tests, which
// CI runs under TSan.

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <uma/sys/log.hpp>

namespace uma {
namespace {

/// A sink that counts what it receives; several are swapped in turn.
struct counting_sink {
  std::shared_ptr<std::atomic<std::size_t>> received = std::make_shared<std::atomic<std::size_t>>();
  void operator()(log_level, std::string_view message) const {
    if (!message.empty())
      received->fetch_add(1, std::memory_order_relaxed);
  }
};

TEST(log_race, every_message_reaches_one_of_the_sinks_while_they_are_swapped) {
  constexpr int loggers = 4;
  constexpr int messages_each = 2000;
  const auto previous_level = current_log_level();
  set_log_level(log_level::info);
  counting_sink first, second;
  set_log_sink(first);

  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < loggers; ++t)
    threads.emplace_back([&done, t] {
      const std::string text = "thread " + std::to_string(t);
      for (int i = 0; i < messages_each; ++i)
        log(log_level::info, text);
      done.fetch_add(1);
    });
  // Swap until every logger is done (and at least a few times).
  for (int swaps = 0; done.load() < loggers || swaps < 10; ++swaps)
    set_log_sink(swaps % 2 == 0 ? log_sink(second) : log_sink(first));
  for (auto& t : threads)
    t.join();
  set_log_sink({});
  set_log_level(previous_level);

  EXPECT_EQ(first.received->load() + second.received->load(),
            static_cast<std::size_t>(loggers) * messages_each);
}

}  // namespace
}  // namespace uma
