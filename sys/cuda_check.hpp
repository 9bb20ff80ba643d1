#pragma once

// The one CUDA-check helper of uma. Only sys/cuda_* files include this header (it pulls in the
// CUDA runtime headers); everything else sees `uma::cuda_error` through sys/error.hpp.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <string_view>

#include <uma/sys/error.hpp>

namespace uma::detail {

/// The uma error code a CUDA status maps to: `out_of_memory`, `invalid_argument`,
/// `not_supported`, `no_device`, `capture_in_progress`, else `backend_error`.
[[nodiscard]] errc classify_cuda_error(cudaError_t status) noexcept;

/// True for statuses that poison the CUDA context: every later call fails the same way and the
/// process must restart to use the device again.
[[nodiscard]] bool is_sticky_cuda_error(cudaError_t status) noexcept;

/// "cudaErrorInvalidValue (invalid argument)": the status's name and description.
[[nodiscard]] std::string describe_cuda_status(cudaError_t status);

/// "0x7f12345000" ("nullptr" for null): pointers in messages are always hexadecimal.
[[nodiscard]] std::string hex(const void* ptr);

/// "1048576 bytes (1.0 MiB)".
[[nodiscard]] std::string describe_bytes(std::size_t bytes);

/// Throws `cuda_error` for `status` (not `cudaSuccess`). The message reads
/// "<call> failed: <name> (<description>); <context> [<file>:<line>]", where `call` may be the
/// whole call expression: only the function name before '(' is kept. A non-sticky status is also
/// cleared from the runtime's per-thread last-error slot.
[[noreturn]] void throw_cuda_error(cudaError_t status, std::string_view call,
                                   std::string_view context, const char* file, int line);

}  // namespace uma::detail

/// Evaluates the CUDA runtime call `call`; on failure throws `uma::cuda_error` naming the call,
/// the error and `context` (a string expression, evaluated only on failure: put the sizes,
/// pointers and locations involved there).
#define UMA_CUDA_CHECK(call, context)                                                          \
  do {                                                                                         \
    const ::cudaError_t uma_cuda_status_ = (call);                                             \
    if (uma_cuda_status_ != ::cudaSuccess) [[unlikely]] {                                      \
      ::uma::detail::throw_cuda_error(uma_cuda_status_, #call, (context), __FILE__, __LINE__); \
    }                                                                                          \
  } while (false)
