#include <uma/sys/log.hpp>

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace uma {

namespace {

std::atomic<std::uint8_t> threshold{static_cast<std::uint8_t>(log_level::info)};

/// The sink in force: a shared_ptr swapped under a mutex, so that a message being reported keeps
/// the sink it started with alive while another thread replaces it.
struct sink_slot {
  std::mutex mutex;
  std::shared_ptr<const log_sink> sink;
};

sink_slot& slot() {
  static sink_slot s;  // constructed on first use: logging works during static initialisation
  return s;
}

void default_sink(log_level level, std::string_view message) noexcept {
  // One write per line, so that lines of several threads do not interleave.
  std::string line = "uma: ";
  line.append(to_string(level)).append(": ").append(message).push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace

std::string_view to_string(log_level level) noexcept {
  switch (level) {
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warning:
      return "warning";
    case log_level::error:
      return "error";
  }
  return "unknown";
}

log_sink set_log_sink(log_sink sink) {
  auto next = sink ? std::make_shared<const log_sink>(std::move(sink)) : nullptr;
  auto& s = slot();
  std::shared_ptr<const log_sink> previous;
  {
    std::lock_guard lock{s.mutex};
    previous = std::exchange(s.sink, std::move(next));
  }
  return previous ? *previous : log_sink{};
}

void set_log_level(log_level level) noexcept {
  threshold.store(static_cast<std::uint8_t>(level), std::memory_order_relaxed);
}

log_level current_log_level() noexcept {
  return static_cast<log_level>(threshold.load(std::memory_order_relaxed));
}

bool log_enabled(log_level level) noexcept {
  return static_cast<std::uint8_t>(level) >= threshold.load(std::memory_order_relaxed);
}

void log(log_level level, std::string_view message) noexcept {
  if (!log_enabled(level))
    return;
  try {
    std::shared_ptr<const log_sink> sink;
    {
      auto& s = slot();
      std::lock_guard lock{s.mutex};
      sink = s.sink;
    }
    if (sink)
      (*sink)(level, message);
    else
      default_sink(level, message);
  } catch (...) {
    // A sink that throws (or host memory running out while formatting) loses this message only.
  }
}

}  // namespace uma
