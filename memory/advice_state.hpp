#pragma once

#include <optional>
#include <vector>

#include <uma/sys/advice.hpp>
#include <uma/sys/location.hpp>

namespace uma {

/// The advice the allocator has applied to a whole region, so that it can skip runtime calls
/// that change nothing (SetAccessedBy costs ~1.5 ms on the GPU machine even then). `known`
/// turns false once part of a region was advised through a sub-view: from then on nothing is
/// skipped for that region.
struct advice_state {
  bool known = true;
  bool read_mostly = false;
  std::optional<location> preferred{};
  std::vector<location> accessed_by{};  ///< sorted

  /// True when applying `a` (with `loc`) would change nothing.
  [[nodiscard]] bool unchanged_by(advice a, const location& loc) const noexcept;
  /// Records `a` as applied.
  void apply(advice a, const location& loc);
  /// True when no advice is in force (a fresh allocation's state).
  [[nodiscard]] bool is_default() const noexcept {
    return known && !read_mostly && !preferred && accessed_by.empty();
  }
};

}  // namespace uma
