#pragma once

#include <cstdint>
#include <string_view>

namespace uma {

/// What kind of memory a pointer refers to (Warp's `MemoryKind`).
enum class memory_kind : std::uint8_t {
  unknown = 0,   ///< null, or the backend cannot tell
  host,          ///< pageable system memory
  pinned_host,   ///< page-locked host memory (cudaMallocHost / cudaHostRegister)
  cuda_device,   ///< device memory (cudaMalloc)
  cuda_mempool,  ///< device memory from a stream-ordered pool (cudaMallocAsync)
  cuda_managed,  ///< managed memory (cudaMallocManaged)
};

/// "host", "pinned_host", "cuda_device", "cuda_mempool", "cuda_managed", "unknown".
[[nodiscard]] std::string_view to_string(memory_kind k) noexcept;

}  // namespace uma
