#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace uma {

/// What one device can do with managed memory. Queried once per device by the backend and cached.
struct device_capabilities {
  std::int32_t ordinal = -1;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  std::size_t total_memory = 0;
  bool managed_memory = false;                   ///< cudaDevAttrManagedMemory
  bool concurrent_managed_access = false;        ///< cudaDevAttrConcurrentManagedAccess
  bool pageable_memory_access = false;           ///< GPU reads CPU pageable memory (HMM/ATS)
  bool pageable_uses_host_page_tables = false;   ///< ... through the host's page tables (ATS)
  bool host_native_atomics = false;              ///< cudaDevAttrHostNativeAtomicSupported
  bool direct_managed_access_from_host = false;  ///< host reads GPU-resident managed memory
  bool memory_pools = false;                     ///< cudaDevAttrMemoryPoolsSupported
  std::int32_t host_numa_id = -1;                ///< closest host NUMA node, -1 if none
  bool batch_api = false;  ///< cudaMem{Prefetch,Discard,DiscardAndPrefetch}BatchAsync usable
};

}  // namespace uma
