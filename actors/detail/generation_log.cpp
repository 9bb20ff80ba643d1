#include <uma/actors/detail/generation_log.hpp>

#include <utility>

namespace uma::detail {

void generation_log::started(std::uint64_t generation) {
  std::lock_guard lock(mutex_);
  records_[generation] = generation_record{generation, true, {}, 0, 0, {}};
}

void generation_log::stopped(std::uint64_t generation, const allocator_stats& final_stats,
                             const stop_report& report) {
  std::lock_guard lock(mutex_);
  auto& rec = records_[generation];
  rec.generation = generation;
  rec.final_stats = final_stats;
  rec.regions_freed = report.regions_freed;
  rec.regions_leaked = report.regions_leaked;
}

void generation_log::ended(std::uint64_t generation, std::string reason) {
  std::lock_guard lock(mutex_);
  auto& rec = records_[generation];
  rec.alive = false;
  rec.exit_reason = std::move(reason);
}

std::vector<generation_record> generation_log::records() const {
  std::lock_guard lock(mutex_);
  std::vector<generation_record> out;
  out.reserve(records_.size());
  for (const auto& [generation, rec] : records_)
    out.push_back(rec);
  return out;
}

}  // namespace uma::detail
