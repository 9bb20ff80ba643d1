#pragma once

#include <new>
#include <stdexcept>

#include <caf/error.hpp>

#include <uma/messages/error_category.hpp>
#include <uma/sys/error.hpp>

namespace uma::detail {

/// Runs `f`; what it throws comes back as the caf::error to reply (none when it returned): a
/// uma::error as itself, host memory exhaustion as out_of_memory, anything else as
/// backend_error with its message.
template <class F>
[[nodiscard]] caf::error error_of(F&& f) {
  try {
    f();
    return {};
  } catch (const error& e) {
    return make_caf_error(e);
  } catch (const std::bad_alloc&) {
    return make_caf_error(errc::out_of_memory, "host memory exhausted while serving a request");
  } catch (const std::exception& e) {
    return make_caf_error(errc::backend_error, e.what());
  }
}

}  // namespace uma::detail
