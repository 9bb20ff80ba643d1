#include <uma/sys/cuda_check.hpp>

#include <cstdint>
#include <cstdio>
#include <iterator>

namespace uma::detail {

errc classify_cuda_error(cudaError_t status) noexcept {
  switch (status) {
    case cudaErrorMemoryAllocation:
      return errc::out_of_memory;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
      return errc::invalid_argument;
    case cudaErrorNotSupported:
    case cudaErrorCallRequiresNewerDriver:
      return errc::not_supported;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorDevicesUnavailable:
      return errc::no_device;
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureMerge:
    case cudaErrorStreamCaptureUnmatched:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorCapturedEvent:
    case cudaErrorStreamCaptureWrongThread:
      return errc::capture_in_progress;
    default:
      return errc::backend_error;
  }
}

bool is_sticky_cuda_error(cudaError_t status) noexcept {
  switch (status) {
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContained:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorContextIsDestroyed:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

std::string describe_cuda_status(cudaError_t status) {
  // Both functions are pure table look-ups in the runtime: they work without a driver.
  std::string text = cudaGetErrorName(status);
  text += " (";
  text += cudaGetErrorString(status);
  text += ')';
  return text;
}

std::string hex(const void* ptr) {
  if (ptr == nullptr) {
    return "nullptr";
  }
  char buffer[2 + 2 * sizeof(void*) + 1];
  std::snprintf(buffer, sizeof(buffer), "%#llx",
                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(ptr)));
  return buffer;
}

std::string describe_bytes(std::size_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  auto value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%zu bytes (%.1f %s)", bytes, value, units[unit]);
  return buffer;
}

void throw_cuda_error(cudaError_t status, std::string_view call, std::string_view context,
                      const char* file, int line) {
  const bool sticky = is_sticky_cuda_error(status);
  if (!sticky) {
    // The failed call also set the per-thread last error; clear it so a later, unrelated
    // cudaGetLastError does not report it a second time. A sticky error cannot be cleared.
    static_cast<void>(cudaGetLastError());
  }
  const auto paren = call.find('(');
  if (paren != std::string_view::npos) {
    call = call.substr(0, paren);
  }
  while (!call.empty() && call.back() == ' ') {
    call.remove_suffix(1);
  }
  std::string message(call);
  message += " failed: ";
  message += describe_cuda_status(status);
  if (!context.empty()) {
    message += "; ";
    message += context;
  }
  if (sticky) {
    message += "; the CUDA context is poisoned";
  }
  message += " [";
  message += file;
  message += ':';
  message += std::to_string(line);
  message += ']';
  throw cuda_error(sticky ? errc::context_lost : classify_cuda_error(status),
                   static_cast<int>(status), sticky, message);
}

}  // namespace uma::detail
