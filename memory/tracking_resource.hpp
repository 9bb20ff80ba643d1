#pragma once

#include <memory>
#include <memory_resource>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <uma/memory/resource_adaptor.hpp>

namespace uma {

/// One outstanding allocation of a tracking_resource.
struct tracked_allocation {
  const void* data = nullptr;
  std::size_t bytes = 0;    ///< asked for
  std::size_t charged = 0;  ///< held for it
  std::string label{};
};

/// Records every outstanding allocation with its label and sizes: the outstanding-allocation
/// report, and the one owner of labels in uma (the allocator's region report reads them here).
class tracking_resource final : public resource_adaptor {
 public:
  /// Tracks what goes through to `upstream`.
  explicit tracking_resource(memory_resource& upstream) noexcept : resource_adaptor(upstream) {}

  /// Every outstanding allocation, in address order.
  [[nodiscard]] std::vector<tracked_allocation> outstanding() const;
  /// The label of the outstanding allocation whose data starts at `data` ("" when none).
  [[nodiscard]] std::string label_of(const void* data) const;
  /// Forgets every outstanding allocation except those whose data starts at one of `kept`:
  /// post_stop, once the rest went with their slabs or were freed.
  void keep_only(const std::vector<const void*>& kept) noexcept;
  /// How many allocations are outstanding.
  [[nodiscard]] std::size_t size() const;

 protected:
  allocation do_allocate(const allocation_request& r) override;
  void do_deallocate(const allocation& a) noexcept override;

 private:
  /// One outstanding allocation as kept here: its nodes and labels come from `arena_`.
  struct entry {
    std::size_t bytes = 0;
    std::size_t charged = 0;
    std::pmr::string label;
  };
  using table = std::pmr::unordered_map<const void*, entry>;

  void record(const allocation& a, const std::string& label);

  mutable std::mutex mutex_;
  // Nodes from a pool of the tracker's own, not from malloc one by one: recording costs no heap
  // call on the allocate path, and post_stop forgetting 100 000 entries (keep_only) returns them
  // to the pool instead of freeing each across threads' arenas (docs/performance.md section 8).
  /// A table built inside `arena` (the object, its buckets, nodes and labels).
  [[nodiscard]] static table* make_table(std::pmr::memory_resource& arena);

  // The table lives wholly inside its pool, so keep_only drops 100 000 entries by dropping the
  // pool, without walking them: their destructors would only give memory back to that pool.
  std::unique_ptr<std::pmr::unsynchronized_pool_resource> arena_ =
      std::make_unique<std::pmr::unsynchronized_pool_resource>();
  table* live_ = make_table(*arena_);
  // The pool keep_only replaced: given back to the system with the tracker (the allocator's
  // destruction), not inside post_stop, where unmapping it cost more than all the rest.
  std::unique_ptr<std::pmr::unsynchronized_pool_resource> retired_;
};

}  // namespace uma
