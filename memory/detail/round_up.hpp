#pragma once

#include <cstddef>
#include <cstdint>

#include <uma/sys/detail/format.hpp>
#include <uma/sys/error.hpp>

namespace uma::detail {

/// `bytes` rounded up to a multiple of `unit` (> 0): the one page-rounding rule of uma (pool
/// blocks, slabs, lease blocks). Throws `overflow` naming both operands when it does not fit.
[[nodiscard]] inline std::size_t round_up(std::size_t bytes, std::size_t unit) {
  if (bytes > SIZE_MAX - (unit - 1))
    raise(errc::overflow, "allocate: " + detail::bytes(bytes) + " rounded up to a multiple of " +
                              detail::bytes(unit) + " overflow size_t");
  return (bytes + unit - 1) / unit * unit;
}

}  // namespace uma::detail
