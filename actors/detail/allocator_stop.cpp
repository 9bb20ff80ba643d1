#include <uma/actors/detail/allocator_stop.hpp>

#include <chrono>
#include <string>
#include <utility>

#include <uma/messages/error_category.hpp>
#include <uma/sys/log.hpp>

namespace uma::detail {

void stop_allocator(const stop_parts& p) noexcept {
  const auto start = std::chrono::steady_clock::now();
  stop_report report;
  try {
    report.pins_drained =
        p.control.pins() == 0 || p.control.wait_for_pins(p.config.supervision.drain_timeout);
  } catch (...) {
    report.pins_drained = false;
  }
  p.lanes.drain_and_stop();  // queued prefetches, advice, frees and growth run out first
  try {
    p.runtime.synchronize();
  } catch (const std::exception& e) {
    log(log_level::error, std::string("post_stop synchronize failed: ") + e.what());
  }
  p.core.stop(report);
  p.residency.clear();
  auto pending = std::exchange(p.pending, {});
  for (auto& [ticket, finish] : pending) {
    caf::message none;
    caf::error err = make_caf_error(errc::allocator_stopped,
                                    "the allocator stopped before the request completed");
    finish(none, err);
  }
  report.duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  if (p.config.supervision.on_stop) {
    try {
      p.config.supervision.on_stop(p.core.stats(), report);
    } catch (const std::exception& e) {
      log(log_level::error, std::string("on_stop callback failed: ") + e.what());
    }
  }
  p.control.finish_stop(std::move(report));
}

}  // namespace uma::detail
