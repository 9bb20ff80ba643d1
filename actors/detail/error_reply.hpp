#pragma once

#include <exception>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <caf/error.hpp>

#include <uma/messages/error_category.hpp>
#include <uma/sys/error.hpp>

namespace uma::detail {

/// What a request answers for what it threw: the one mapping of the actor's handlers, its lane
/// jobs and the caller calls. A uma::error stays as it was thrown (a fatal_error or a sticky
/// cuda_error stays one, `fatal` then says it ends the incarnation), host memory exhaustion is
/// out_of_memory, anything else backend_error with its message.
struct failure {
  std::exception_ptr thrown;
  errc code = errc::backend_error;
  bool fatal = false;
  std::string what;

  /// The error reply.
  [[nodiscard]] caf::error reply() const { return make_caf_error(code, what); }
};

/// Classifies `thrown` (not null).
[[nodiscard]] inline failure failure_of(std::exception_ptr thrown) {
  try {
    std::rethrow_exception(thrown);
  } catch (const error& e) {
    return {thrown, e.code(), is_fatal(e), e.what()};
  } catch (const std::bad_alloc&) {
    const error e(errc::out_of_memory, "host memory exhausted while serving a request");
    return {std::make_exception_ptr(e), e.code(), false, e.what()};
  } catch (const std::exception& x) {
    const error e(errc::backend_error, x.what());
    return {std::make_exception_ptr(e), e.code(), false, e.what()};
  } catch (...) {
    const error e(errc::backend_error, "a request failed with an unknown exception");
    return {std::make_exception_ptr(e), e.code(), false, e.what()};
  }
}

/// Runs `f`; what it throws comes back classified (failure_of), nullopt when it returned.
template <class F>
[[nodiscard]] std::optional<failure> failure_in(F&& f) {
  try {
    f();
    return std::nullopt;
  } catch (...) {
    return failure_of(std::current_exception());
  }
}

/// Runs `f`; what it throws comes back as the error reply (none when it returned).
template <class F>
[[nodiscard]] caf::error error_of(F&& f) {
  const auto failed = failure_in(std::forward<F>(f));
  return failed ? failed->reply() : caf::error{};
}

}  // namespace uma::detail
