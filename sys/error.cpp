#include <uma/sys/error.hpp>

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
    case errc::context_lost:
      return "context_lost";
    case errc::unrecoverable:
      return "unrecoverable";
    case errc::timeout:
      return "timeout";
  }
  return "unknown_error";
}

bool is_fatal(const error& e) noexcept {
  if (dynamic_cast<const fatal_error*>(&e) != nullptr)
    return true;
  if (const auto* cuda = dynamic_cast<const cuda_error*>(&e); cuda != nullptr && cuda->sticky())
    return true;
  return e.code() == errc::context_lost || e.code() == errc::unrecoverable;
}

void raise(errc code, const std::string& message) {
  throw error(code, message);
}

}  // namespace uma
