// probe_cuda / make_cuda_backend for builds without the CUDA toolkit: CUDA is never usable.

#include <uma/sys/cuda_backend.hpp>

namespace uma {

namespace {

constexpr const char* no_cuda_reason = "uma was built without CUDA support";

}  // namespace

cuda_probe_result probe_cuda() noexcept {
  cuda_probe_result result;
  try {
    result.reason = no_cuda_reason;
  } catch (...) {
    // Copying a short literal cannot realistically fail; an empty reason is still "not usable".
  }
  return result;
}

std::shared_ptr<backend> make_cuda_backend() {
  raise(errc::no_device, no_cuda_reason);
}

}  // namespace uma
