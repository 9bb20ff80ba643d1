#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <uma/memory/advice_state.hpp>
#include <uma/memory/detail/control_block.hpp>
#include <uma/sys/backend.hpp>

namespace uma {

/// One row of the outstanding-allocation report.
struct region_info {
  std::uint64_t id = 0;
  std::uint64_t generation = 0;
  std::uint64_t bytes = 0;
  std::string label{};
  attach_flag attach = attach_flag::global;
  std::int64_t refs = 0;  ///< handles alive at the time of the report (approximate under load)
  std::int64_t pins = 0;
  std::int64_t age_ms = 0;

  friend bool operator==(const region_info&, const region_info&) = default;
};

/// The regions one allocator owns, by id. Actor-thread only.
class region_table {
 public:
  struct entry {
    detail::region* region = nullptr;
    std::string label;
    attach_flag attach = attach_flag::global;
    std::chrono::steady_clock::time_point created;
    advice_state advice{};           ///< what was applied to the whole region (for elision)
    std::uint32_t lease_blocks = 0;  ///< a block lease's backing region: its block count
  };

  /// Adds `r` (the table takes over the region's initial count).
  void insert(detail::region* r, std::string label, attach_flag attach);
  /// The entry for `id`, or null.
  [[nodiscard]] entry* find(std::uint64_t id) noexcept;
  /// Removes `id`; the caller drops the table's count.
  void erase(std::uint64_t id) noexcept { entries_.erase(id); }
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }
  /// Every region, sorted by id.
  [[nodiscard]] std::vector<region_info> report(std::uint64_t generation) const;
  /// Moves all entries out (post_stop).
  [[nodiscard]] std::unordered_map<std::uint64_t, entry> take_all() noexcept {
    return std::exchange(entries_, {});
  }

 private:
  std::unordered_map<std::uint64_t, entry> entries_;
};

}  // namespace uma
