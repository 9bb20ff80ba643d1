#pragma once

#include <compare>
#include <cstdint>
#include <string>

namespace uma {

/// Where managed memory can live or be prefetched to, as CUDA 13's `cudaMemLocation` spells it.
/// A plain value: cheap to copy, comparable, printable. Which kinds an operation accepts is
/// checked by `memory/location_rules.hpp` before anything changes.
struct location {
  enum class kind : std::uint8_t {
    device = 1,            ///< GPU `id`
    host = 2,              ///< system memory, any NUMA node
    host_numa = 3,         ///< system memory on NUMA node `id`
    host_numa_current = 4  ///< the NUMA node closest to the calling thread's CPU
  };

  kind type = kind::host;
  std::int32_t id = 0;  ///< device ordinal or NUMA id; 0 where CUDA ignores it

  /// GPU `ordinal`.
  [[nodiscard]] static constexpr location device(std::int32_t ordinal) noexcept {
    return {kind::device, ordinal};
  }
  /// Any host memory.
  [[nodiscard]] static constexpr location host() noexcept { return {kind::host, 0}; }
  /// Host memory on NUMA node `numa_id`.
  [[nodiscard]] static constexpr location host_numa(std::int32_t numa_id) noexcept {
    return {kind::host_numa, numa_id};
  }
  /// Host memory on the NUMA node closest to the calling thread.
  [[nodiscard]] static constexpr location host_numa_current() noexcept {
    return {kind::host_numa_current, 0};
  }

  [[nodiscard]] constexpr bool is_device() const noexcept { return type == kind::device; }
  [[nodiscard]] constexpr bool is_host_side() const noexcept { return type != kind::device; }

  friend constexpr auto operator<=>(const location&, const location&) = default;
};

/// "device 1", "host", "host numa 0", "host numa current".
[[nodiscard]] std::string to_string(const location& loc);

}  // namespace uma
