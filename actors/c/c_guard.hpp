#pragma once

// How every C entry point of libuma_c turns failures into statuses (actors/c/uma.h): no
// exception crosses into C; a failure becomes a status plus the calling thread's last-error
// message. Internal to libuma_c; not installed.

#include <cstddef>
#include <cstring>
#include <new>
#include <string>

#include <uma/actors/c/c_allocator.hpp>
#include <uma/sys/error.hpp>

namespace uma::c {

/// The calling thread's last-error message (uma_last_error): one per thread, shared by every
/// translation unit of the library.
[[nodiscard]] inline std::string& last_error() noexcept {
  thread_local std::string message;
  return message;
}

/// Records `message` as this thread's last error and returns `status`.
inline uma_status fail(uma_status status, const char* message) noexcept {
  try {
    last_error() = message;
  } catch (...) {
    last_error().clear();  // no memory for the message: the status still says what happened
  }
  return status;
}

/// Runs `f` (returning uma_status), turning every exception into a status and a message.
template <class F>
uma_status guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const status_error& e) {
    return fail(e.status, e.what());
  } catch (const uma::error& e) {
    return fail(static_cast<uma_status>(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(UMA_ERR_OUT_OF_MEMORY, "no host memory for uma's bookkeeping");
  } catch (const std::exception& e) {
    return fail(UMA_ERR_BACKEND, e.what());
  } catch (...) {
    return fail(UMA_ERR_BACKEND, "an unknown exception");
  }
}

/// Throws UMA_ERR_NULL_ARGUMENT naming `what` when `p` is NULL.
inline void require(const void* p, const char* what) {
  if (p == nullptr)
    throw status_error(UMA_ERR_NULL_ARGUMENT, std::string(what) + " is NULL");
}

/// Copies `json` and its NUL into `buffer` (the convention of uma_stats_json): sets `*needed`
/// when given; UMA_ERR_BUFFER_TOO_SMALL naming `what` when `buffer` is NULL or too small.
inline uma_status copy_json(const std::string& json, char* buffer, std::size_t capacity,
                            std::size_t* needed, const char* what) {
  if (needed != nullptr)
    *needed = json.size() + 1;
  if (buffer == nullptr || capacity < json.size() + 1)
    throw status_error(UMA_ERR_BUFFER_TOO_SMALL,
                       std::string(what) + ": " + std::to_string(json.size() + 1) +
                           " bytes needed, " + std::to_string(buffer ? capacity : 0) + " given");
  std::memcpy(buffer, json.c_str(), json.size() + 1);
  return UMA_OK;
}

}  // namespace uma::c
