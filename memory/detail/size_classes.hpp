#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace uma::detail {

/// The caching layer's size classes, in pages: 1, 2, 3, 4, then four classes per doubling
/// (5, 6, 7, 8, 10, 12, 14, 16, 20, ...), so a block is at most a quarter larger than the
/// page-rounded request (jemalloc's spacing). Class indices are dense from 0.
struct size_classes {
  /// The class of a request of `pages` pages (pages >= 1).
  [[nodiscard]] static constexpr std::uint32_t index_of(std::size_t pages) noexcept {
    if (pages <= 4)
      return static_cast<std::uint32_t>(pages - 1);
    const auto e = static_cast<std::uint32_t>(std::bit_width(pages - 1) - 1);  // 2^e < pages
    const std::size_t step = (std::size_t{1} << e) / 4;
    const std::size_t q = (pages - (std::size_t{1} << e) + step - 1) / step;  // 1..4
    return 4 + (e - 2) * 4 + static_cast<std::uint32_t>(q - 1);
  }
  /// The pages of class `index`.
  [[nodiscard]] static constexpr std::size_t pages_of(std::uint32_t index) noexcept {
    if (index < 4)
      return index + 1;
    const std::uint32_t e = (index - 4) / 4 + 2;
    const std::size_t q = (index - 4) % 4 + 1;
    return (std::size_t{1} << e) + q * ((std::size_t{1} << e) / 4);
  }
};

static_assert(size_classes::index_of(1) == 0 && size_classes::index_of(4) == 3);
static_assert(size_classes::index_of(5) == 4 && size_classes::index_of(8) == 7);
static_assert(size_classes::index_of(9) == 8 && size_classes::pages_of(8) == 10);
static_assert(size_classes::index_of(16) == 11 && size_classes::pages_of(11) == 16);
static_assert(size_classes::index_of(17) == 12 && size_classes::pages_of(12) == 20);
static_assert(size_classes::pages_of(size_classes::index_of(1000)) >= 1000);

}  // namespace uma::detail
