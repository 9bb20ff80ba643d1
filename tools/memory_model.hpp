#pragma once

// What a device's capability flags add up to for managed memory: the system models of Warp's
// "CPU/GPU cross-device memory access" table and the CUDA Programming Guide's unified-memory
// paradigms, decided from the flags the driver reports, never from a product name.

#include <cstdint>
#include <string>
#include <string_view>

#include <uma/sys/device_capabilities.hpp>

namespace uma::cli {

/// The CPU/GPU memory model a device belongs to.
enum class memory_system : std::uint8_t {
  no_managed_memory,     ///< the device cannot use managed memory at all
  no_concurrent_access,  ///< managed memory, but the CPU must not touch it while kernels run
  discrete_without_hmm,  ///< full unified memory by page-fault migration, no pageable access
  discrete_with_hmm,     ///< Linux HMM: the GPU also reaches pageable CPU memory
  ats_host_page_tables,  ///< ATS: the GPU walks the host's page tables; CPU access to
                         ///< GPU-resident managed memory still migrates (GB10-style)
  coherent_ats,          ///< ATS and direct CPU access to GPU-resident managed memory
                         ///< (Grace Hopper-style NVLink-C2C)
};

/// The model and the three answers programs branch on.
struct memory_model {
  memory_system system = memory_system::no_managed_memory;
  std::string_view name;                ///< "discrete GPU without HMM"
  std::string_view gpu_to_cpu_memory;   ///< GPU access to CPU (pageable) memory: "no", "yes (HMM)"
  std::string_view cpu_to_gpu_managed;  ///< CPU access to GPU-resident managed memory
  std::string_view cpu_gpu_atomics;     ///< "yes" / "no"
};

/// Classifies a device by its flags.
[[nodiscard]] memory_model classify(const device_capabilities& caps) noexcept;

/// One line: "discrete GPU without HMM: GPU access to CPU memory: no; CPU access to
/// GPU-resident managed memory: via migration; CPU/GPU atomics: no".
[[nodiscard]] std::string verdict(const device_capabilities& caps);

/// The verdict on the host backend, which has no GPU.
inline constexpr std::string_view host_backend_verdict =
    "host backend: no GPU; managed memory is system memory";

}  // namespace uma::cli
