#pragma once

#include <optional>

namespace uma {

template <class T>
class renamed_field;

namespace detail {

/// What a program set through a renamed field's old name, if it set anything: the library's
/// one way to honour the old name without a deprecation warning.
template <class T>
[[nodiscard]] constexpr std::optional<T> set_through_old_name(const renamed_field<T>& f) noexcept;

}  // namespace detail

/// The old name of a config field that was renamed, kept for one release (CHANGELOG.md,
/// "Deprecated"): a program that sets it still builds, the compiler warns where it does, and the
/// library honours the value as if it had been set through the new name. Reading the old name
/// does not compile: it could only give what was set through it, not the field's value.
///
/// Not a `[[deprecated]]` member: GCC and Clang warn about one in the struct's implicitly
/// defined constructors and copies, so every declaration of the config would warn (and fail
/// under -Werror), not only the lines that use the old name.
template <class T>
class renamed_field {
 public:
  constexpr renamed_field() noexcept = default;
  /// Sets the field through its old name (a designated initializer `.old_name = v`).
  [[deprecated(
      "a renamed field: set its new name (CHANGELOG.md, \"Deprecated\")")]] constexpr renamed_field(T value) noexcept  // NOLINT(google-explicit-constructor): as the field
      : value_(value) {}
  /// Sets the field through its old name (`config.old_name = v`).
  [[deprecated(
      "a renamed field: set its new name (CHANGELOG.md, \"Deprecated\")")]] constexpr renamed_field&
  operator=(T value) noexcept {
    value_ = value;
    return *this;
  }
  operator T() const = delete;  // read the new name

 private:
  friend constexpr std::optional<T> detail::set_through_old_name<T>(
      const renamed_field<T>& f) noexcept;

  std::optional<T> value_{};
};

namespace detail {

template <class T>
constexpr std::optional<T> set_through_old_name(const renamed_field<T>& f) noexcept {
  return f.value_;
}

}  // namespace detail

}  // namespace uma
