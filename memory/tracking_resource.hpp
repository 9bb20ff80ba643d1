#pragma once

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
  std::optional<allocation> do_try_allocate(const allocation_request& r) override;
  void do_deallocate(const allocation& a) noexcept override;

 private:
  void record(const allocation& a, const std::string& label);

  mutable std::mutex mutex_;
  std::unordered_map<const void*, tracked_allocation> live_;
};

}  // namespace uma
