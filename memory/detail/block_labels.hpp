#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <uma/memory/event_history.hpp>
#include <uma/memory/labelled_block.hpp>
#include <uma/sys/detail/spin_mutex.hpp>

namespace uma::detail {

struct region;

/// The labels of the block allocator's labelled blocks that are out: a label is for the report,
/// so it lives here, beside the block, and costs no region and no message. Entries are added
/// after a block was handed out and removed before it is counted back, so an entry's record is
/// alive (its slab cannot go while the block is out). Thread-safe: the labels are kept in shards
/// by block id, each under a spinning lock of its own (as the free lists are), so threads handing
/// out labelled blocks at once seldom meet on one (eight threads on one lock were 27x slower a
/// pair than one thread on the H200); a lookup by address asks every shard. Never touched by
/// unlabelled blocks.
class block_labels {
 public:
  /// From now on a labelled block's hand-out and return are events of `history` (the
  /// incarnation's, generation `generation`): the history's chart by label sees them as it sees
  /// labelled regions. Before the block allocator is shared (not thread-safe).
  void record_in(std::shared_ptr<event_history> history, std::uint64_t generation) noexcept {
    history_ = std::move(history);
    generation_ = generation;
  }
  /// Records `label` for the block whose record is `rec` (out, `bytes` asked for). Throws
  /// std::bad_alloc, recording nothing.
  void add(const region* rec, std::size_t bytes, std::string label);
  /// Forgets the block `id` (no-op when it has no label).
  void remove(std::uint64_t id) noexcept;
  /// Every labelled block out, in no particular order.
  [[nodiscard]] std::vector<labelled_block> list() const;
  /// The labelled block out whose slot holds bytes [p, p + bytes) whole, if any (the residency
  /// report names an extent of a slab by it, for every plan on a slab's extent and every
  /// report row). A lookup by address: the slots of blocks out never overlap.
  [[nodiscard]] std::optional<labelled_block> holding(const std::byte* p, std::size_t bytes) const;

 private:
  struct entry {
    const region* rec;
    std::size_t bytes;
    std::string label;
    std::chrono::steady_clock::time_point created;
  };
  /// The labelled blocks whose id falls in it (id % shard_count).
  struct alignas(64) shard {
    mutable spin_mutex mutex;  // held for a map insert, erase or lookup
    std::unordered_map<std::uint64_t, entry> entries;
    std::map<std::uintptr_t, std::uint64_t> by_address;  // a slot's first byte -> its block id
  };
  static constexpr std::size_t shard_count = 16;
  [[nodiscard]] shard& shard_of(std::uint64_t id) noexcept { return shards_[id % shard_count]; }
  std::array<shard, shard_count> shards_;

  /// Records `kind` of block `id` in the history, if there is one; never throws.
  void note(event_kind kind, std::uint64_t id, std::size_t bytes,
            std::string_view label) const noexcept;

  std::shared_ptr<event_history> history_;  // null: no events
  std::uint64_t generation_ = 0;
};

}  // namespace uma::detail
