#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace uma {

/// Error codes of uma. The numeric values are part of the wire format of the CAF error
/// category `uma` (see messages/error_category.hpp): never renumber, only append.
enum class errc : std::uint8_t {
  out_of_memory = 1,    ///< the backend could not provide the memory
  quota_exceeded,       ///< the request would take live bytes past the allocator's quota
  invalid_argument,     ///< the request is malformed (size, location, ref, lengths)
  allocator_stopped,    ///< the allocator incarnation that owned the ref has stopped
  capture_in_progress,  ///< the stream given is capturing a CUDA graph
  not_supported,        ///< the backend or device cannot do this
  no_device,            ///< no usable CUDA device (no driver, no device)
  backend_error,        ///< any other backend failure; the message names the call
  overflow,             ///< count x element size (or padding) does not fit in size_t
  context_lost,         ///< the backend's context is lost or poisoned (sticky CUDA error)
  unrecoverable,        ///< the allocator cannot go on and must not be restarted
  timeout,              ///< no reply within the caller's timeout (the request may still be served)
};

/// Number of error codes plus one (index 0 is unused), for per-code counters.
inline constexpr std::size_t errc_slots = static_cast<std::size_t>(errc::timeout) + 1;

/// The error's name, e.g. "out_of_memory".
[[nodiscard]] std::string_view to_string(errc code) noexcept;

/// The one exception family thrown inside sys/ and memory/. At the actor boundary it becomes
/// a `caf::error` of the `uma` category with the same code and message.
class error : public std::runtime_error {
 public:
  error(errc code, const std::string& message) : std::runtime_error(message), code_(code) {}

  /// The classified error code (supervision decides on this, never on the text).
  [[nodiscard]] errc code() const noexcept { return code_; }

 private:
  errc code_;
};

/// A failed CUDA call. Keeps the raw status so callers can classify sticky errors
/// (a poisoned context) without matching strings.
class cuda_error : public error {
 public:
  cuda_error(errc code, int status, bool sticky, const std::string& message)
      : error(code, message), status_(status), sticky_(sticky) {}

  /// The raw `cudaError_t` value.
  [[nodiscard]] int status() const noexcept { return status_; }
  /// True when the error poisons the CUDA context (the process must restart the context).
  [[nodiscard]] bool sticky() const noexcept { return sticky_; }

 private:
  int status_;
  bool sticky_;
};

/// A failure after which the allocator incarnation cannot go on: it replies the error, then
/// exits with it as its exit reason, and its supervisor decides what happens next.
class fatal_error : public error {
 public:
  using error::error;
};

/// True for errors that end an allocator incarnation: `fatal_error`, a sticky `cuda_error`, or
/// the codes context_lost and unrecoverable.
[[nodiscard]] bool is_fatal(const error& e) noexcept;

/// Throws `error(code, message)`; a helper so hot paths build the message only on failure.
[[noreturn]] void raise(errc code, const std::string& message);

}  // namespace uma
