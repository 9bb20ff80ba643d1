#pragma once

// The CUDA backend's entry points. Deliberately free of CUDA headers: callers see only the
// abstract `backend`; the implementation lives in sys/cuda_backend.cpp (or, in a build without
// CUDA, sys/cuda_unavailable.cpp).

#include <memory>
#include <string>

#include <uma/sys/backend.hpp>
#include <uma/sys/error.hpp>

namespace uma {

/// Result of probing the CUDA runtime: usable when at least one device answers.
struct cuda_probe_result {
  bool usable = false;   ///< at least one device answered
  int device_count = 0;  ///< devices the runtime reports (0 when not usable)
  std::string reason;    ///< why CUDA is not usable, naming the CUDA error; empty when usable
};

/// Asks the CUDA runtime how many devices it sees. Never throws and never crashes without a
/// driver: a missing driver, a stub library or zero devices are reported in `reason`.
[[nodiscard]] cuda_probe_result probe_cuda() noexcept;

/// Creates the CUDA backend over every visible device and caches their capabilities. Throws
/// `error(no_device)` with the probe's reason when no device is usable, and `cuda_error` when a
/// device cannot be queried.
[[nodiscard]] std::shared_ptr<backend> make_cuda_backend();

}  // namespace uma
