#include "tools/memory_model.hpp"

namespace uma::cli {

namespace {

[[nodiscard]] std::string_view gpu_to_cpu(const device_capabilities& caps) noexcept {
  if (!caps.pageable_memory_access)
    return "no";
  return caps.pageable_uses_host_page_tables ? "yes (ATS)" : "yes (HMM)";
}

[[nodiscard]] std::string_view cpu_to_gpu(const device_capabilities& caps) noexcept {
  if (!caps.managed_memory)
    return "no (no managed memory)";
  if (caps.direct_managed_access_from_host)
    return "direct";
  if (caps.concurrent_managed_access)
    return "via migration";
  return "via migration, only while no kernel runs";
}

}  // namespace

memory_model classify(const device_capabilities& caps) noexcept {
  memory_model m;
  m.gpu_to_cpu_memory = gpu_to_cpu(caps);
  m.cpu_to_gpu_managed = cpu_to_gpu(caps);
  m.cpu_gpu_atomics = caps.host_native_atomics ? "yes" : "no";
  // The most limiting property decides first: without concurrent access the CPU must keep off
  // managed memory while kernels run, whatever else the device can do.
  if (!caps.managed_memory) {
    m.system = memory_system::no_managed_memory;
    m.name = "GPU without managed memory";
  } else if (!caps.concurrent_managed_access) {
    m.system = memory_system::no_concurrent_access;
    m.name = "unified memory without concurrent CPU/GPU access";
  } else if (caps.pageable_memory_access && caps.pageable_uses_host_page_tables) {
    if (caps.direct_managed_access_from_host) {
      m.system = memory_system::coherent_ats;
      m.name = "coherent CPU/GPU memory with ATS (Grace Hopper-style)";
    } else {
      m.system = memory_system::ats_host_page_tables;
      m.name = "ATS over host page tables, no direct CPU access to GPU memory";
    }
  } else if (caps.pageable_memory_access) {
    m.system = memory_system::discrete_with_hmm;
    m.name = "discrete GPU with HMM";
  } else {
    m.system = memory_system::discrete_without_hmm;
    m.name = "discrete GPU without HMM";
  }
  return m;
}

std::string verdict(const device_capabilities& caps) {
  const auto m = classify(caps);
  std::string text(m.name);
  text += ": GPU access to CPU memory: ";
  text += m.gpu_to_cpu_memory;
  text += "; CPU access to GPU-resident managed memory: ";
  text += m.cpu_to_gpu_managed;
  text += "; CPU/GPU atomics: ";
  text += m.cpu_gpu_atomics;
  return text;
}

}  // namespace uma::cli
