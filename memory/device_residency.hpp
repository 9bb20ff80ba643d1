#pragma once

#include <cstddef>

namespace uma {

/// The residency account of one device, or of one tenant on one device (docs/residency.md).
struct device_residency {
  std::size_t memory = 0;    ///< the device's memory (budgets may not pass it)
  std::size_t budget = 0;    ///< 0: none set (the account counts, nothing is evicted)
  std::size_t resident = 0;  ///< bytes the account holds on the device (replicas included)
  std::size_t peak = 0;      ///< the most `resident` has been
  std::size_t held = 0;      ///< of `resident`, held by plans not yet done_with
};

}  // namespace uma
