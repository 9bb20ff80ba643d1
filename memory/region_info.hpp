#pragma once

#include <cstdint>
#include <string>

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
  memory_kind kind = memory_kind::cuda_managed;  ///< managed memory, or a tier's

  friend bool operator==(const region_info&, const region_info&) = default;
};

}  // namespace uma
