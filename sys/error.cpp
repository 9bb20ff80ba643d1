#include "sys/error.hpp"

namespace uma {

std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::out_of_memory:
      return "out_of_memory";
    case errc::quota_exceeded:
      return "quota_exceeded";
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::allocator_stopped:
      return "allocator_stopped";
    case errc::capture_in_progress:
      return "capture_in_progress";
    case errc::not_supported:
      return "not_supported";
    case errc::no_device:
      return "no_device";
    case errc::backend_error:
      return "backend_error";
    case errc::overflow:
      return "overflow";
  }
  return "unknown_error";
}

void raise(errc code, const std::string& message) {
  throw error(code, message);
}

}  // namespace uma
