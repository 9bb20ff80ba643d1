#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <uma/memory/advice_state.hpp>
#include <uma/memory/control_block.hpp>
#include <uma/memory/region_info.hpp>
#include <uma/memory/tracking_resource.hpp>
#include <uma/sys/backend.hpp>

namespace uma::detail {

/// The regions one allocator owns, by id. Labels are not kept here: the resource stack's
/// tracking_resource owns them (one owner), and the report reads them there. Not thread-safe:
/// its owner (the allocator's allocation_core) is reachable only through the incarnation's guard.
class region_table {
 public:
  struct entry {
    detail::region* region = nullptr;
    attach_flag attach = attach_flag::global;
    std::chrono::steady_clock::time_point created;
    advice_state advice{};          ///< what was applied to the whole region (for elision)
    std::uint32_t slab_blocks = 0;  ///< a slab of the block allocator: its block count
    std::optional<location> last_prefetch{};  ///< the last prefetch asked for (snapshots)
  };

  /// Adds `r` (the table takes over the region's initial count).
  void insert(region* r, attach_flag attach);
  /// The entry for `id`, or null.
  [[nodiscard]] entry* find(std::uint64_t id) noexcept;
  /// The same, read-only.
  [[nodiscard]] const entry* find(std::uint64_t id) const noexcept {
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : &it->second;
  }
  /// The region holding bytes [address, address + bytes) whole, and its id; null when no live
  /// region of this table does (plans by address range, docs/residency.md "Ranges").
  [[nodiscard]] const entry* containing(std::uintptr_t address, std::size_t bytes,
                                        std::uint64_t& id) const noexcept;
  /// Removes `id`; the caller drops the table's count.
  void erase(std::uint64_t id) noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return entries_.size(); }
  /// Calls `f(id, entry)` for every region, in no order.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& [id, e] : entries_)
      f(id, e);
  }
  /// Every region, sorted by id, labelled as `labels` recorded it.
  [[nodiscard]] std::vector<region_info> report(std::uint64_t generation,
                                                const tracking_resource& labels) const;
  /// Moves all entries out (post_stop).
  [[nodiscard]] std::unordered_map<std::uint64_t, entry> take_all() noexcept {
    by_address_.clear();
    return std::exchange(entries_, {});
  }

 private:
  std::unordered_map<std::uint64_t, entry> entries_;
  std::map<std::uintptr_t, std::uint64_t> by_address_;  // each region's first byte: its id
};

}  // namespace uma::detail
