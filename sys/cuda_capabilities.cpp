// Device queries of the CUDA backend: capabilities, versions, host NUMA nodes, the driver entry
// point that tells pool memory apart.

#include <algorithm>
#include <filesystem>
#include <string>

#include <uma/sys/cuda_backend_impl.hpp>
#include <uma/sys/cuda_check.hpp>

namespace uma::detail {

std::string version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

int count_host_numa_nodes() noexcept {
  try {
    std::error_code ec;
    int nodes = 0;
    for (std::filesystem::directory_iterator it("/sys/devices/system/node", ec), end;
         !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.size() > 4 && name.starts_with("node") &&
          std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        ++nodes;
      }
    }
    return std::max(nodes, 1);
  } catch (...) {
    return 1;
  }
}

device_capabilities query_device(int ordinal) {
  const std::string which = "device " + std::to_string(ordinal);
  cudaDeviceProp properties{};
  UMA_CUDA_CHECK(cudaGetDeviceProperties(&properties, ordinal), which);
  device_capabilities caps;
  caps.ordinal = ordinal;
  caps.name = properties.name;
  caps.compute_major = properties.major;
  caps.compute_minor = properties.minor;
  caps.total_memory = properties.totalGlobalMem;
  const auto flag = [&](cudaDeviceAttr attribute, const char* name) {
    int value = 0;
    UMA_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, ordinal),
                   std::string(name) + " of " + which);
    return value != 0;
  };
  caps.managed_memory = flag(cudaDevAttrManagedMemory, "cudaDevAttrManagedMemory");
  caps.concurrent_managed_access =
      flag(cudaDevAttrConcurrentManagedAccess, "cudaDevAttrConcurrentManagedAccess");
  caps.pageable_memory_access =
      flag(cudaDevAttrPageableMemoryAccess, "cudaDevAttrPageableMemoryAccess");
  caps.pageable_uses_host_page_tables = flag(cudaDevAttrPageableMemoryAccessUsesHostPageTables,
                                             "cudaDevAttrPageableMemoryAccessUsesHostPageTables");
  caps.host_native_atomics =
      flag(cudaDevAttrHostNativeAtomicSupported, "cudaDevAttrHostNativeAtomicSupported");
  caps.direct_managed_access_from_host =
      flag(cudaDevAttrDirectManagedMemAccessFromHost, "cudaDevAttrDirectManagedMemAccessFromHost");
  caps.memory_pools = flag(cudaDevAttrMemoryPoolsSupported, "cudaDevAttrMemoryPoolsSupported");
  // cudaDevAttrHostNumaId exists since CUDA 12.2; an older driver refuses it: no NUMA id then.
  int numa = -1;
  if (cudaDeviceGetAttribute(&numa, cudaDevAttrHostNumaId, ordinal) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    numa = -1;
  }
  caps.host_numa_id = numa;
  return caps;
}

pointer_get_attribute_fn resolve_pointer_get_attribute() noexcept {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t status = cudaGetDriverEntryPointByVersion(
      "cuPointerGetAttribute", &fn, pointer_get_attribute_abi, cudaEnableDefault, &found);
  if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == nullptr) {
    static_cast<void>(cudaGetLastError());
    return nullptr;
  }
  return reinterpret_cast<pointer_get_attribute_fn>(fn);
}

}  // namespace uma::detail
