#pragma once

// The allocator supervisor's record of each incarnation (actors/allocator_supervisor.cpp): when
// it started, what its post_stop left (written from that incarnation's own thread, its stop
// callback), and why it ended (written by the supervisor on its down message). The supervisor
// reads them for supervision_stats. Shared with the stop callbacks, which may run after the
// supervisor is gone, hence held by shared_ptr and locked.

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <uma/memory/stop_report.hpp>
#include <uma/messages/supervision_types.hpp>

namespace uma::detail {

class generation_log {
 public:
  /// Generation `generation` runs: a fresh record (alive, nothing final yet).
  void started(std::uint64_t generation);
  /// Its post_stop's final counters and what it freed and leaked (any thread).
  void stopped(std::uint64_t generation, const allocator_stats& final_stats,
               const stop_report& report);
  /// It is gone, for `reason` (rendered).
  void ended(std::uint64_t generation, std::string reason);
  /// Every record, oldest generation first.
  [[nodiscard]] std::vector<generation_record> records() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::uint64_t, generation_record> records_;
};

}  // namespace uma::detail
