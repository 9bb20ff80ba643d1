#pragma once

// The "uma" boost::system error category and the detail an operation of actors/asio_bridge.hpp
// can report besides its code. Included through actors/asio_bridge.hpp.

#include <cstddef>
#include <string>
#include <type_traits>

#include <boost/system/error_category.hpp>
#include <boost/system/error_code.hpp>

#include <uma/sys/error.hpp>

namespace uma::asio {

/// The `boost::system` error category named "uma". An error_code of it carries a `uma::errc`
/// value and nothing else; its message is the code's name ("invalid_argument"). The detailed
/// text travels separately, see `error_detail`.
[[nodiscard]] const boost::system::error_category& category() noexcept;

}  // namespace uma::asio

namespace uma {

/// `code` as a `boost::system::error_code` of the "uma" category. Found by ADL, so an
/// error_code compares with a code directly: `ec == uma::errc::invalid_argument`.
[[nodiscard]] inline boost::system::error_code make_error_code(errc code) noexcept {
  return {static_cast<int>(code), asio::category()};
}

}  // namespace uma

template <>
struct boost::system::is_error_code_enum<uma::errc> : std::true_type {};

namespace uma::asio {

namespace detail {

/// The category behind `uma::asio::category()`: names the code, nothing more.
class uma_error_category final : public boost::system::error_category {
 public:
  // A fixed id makes codes compare equal across shared libraries, as Boost.System recommends.
  constexpr uma_error_category() noexcept : error_category(0x8f3a'61d2'c94e'07b5ULL) {}

  using error_category::message;

  const char* name() const noexcept override { return "uma"; }

  std::string message(int value) const override {
    if (value >= 1 && static_cast<std::size_t>(value) < errc_slots)
      return std::string(to_string(static_cast<errc>(value)));
    return "unknown uma error " + std::to_string(value);
  }
};

}  // namespace detail

inline const boost::system::error_category& category() noexcept {
  static const detail::uma_error_category instance;
  return instance;
}

/// The full story of an operation's outcome. The error_code alone carries only the code; wrap a
/// token with `with_detail(token, detail)` to have the allocator's message too. The bridge
/// writes `detail` on the handler's executor right before it invokes the handler, on every
/// completion: the same code the handler gets, and the message (empty on success).
struct error_detail {
  boost::system::error_code code{};  ///< what the handler receives
  std::string message{};             ///< e.g. "allocate: zero-size request (0 elements of 4 bytes)"
};

}  // namespace uma::asio
