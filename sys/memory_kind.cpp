#include <uma/sys/memory_kind.hpp>

namespace uma {

std::string_view to_string(memory_kind k) noexcept {
  switch (k) {
    case memory_kind::unknown:
      return "unknown";
    case memory_kind::host:
      return "host";
    case memory_kind::pinned_host:
      return "pinned_host";
    case memory_kind::cuda_device:
      return "cuda_device";
    case memory_kind::cuda_mempool:
      return "cuda_mempool";
    case memory_kind::cuda_managed:
      return "cuda_managed";
  }
  return "unknown";
}

}  // namespace uma
