// `uma info`: what uma would run on, and what the hardware means for managed memory.

#include <iostream>
#include <string>

#include <uma/sys/cuda_backend.hpp>
#include "tools/cli_commands.hpp"
#include "tools/memory_model.hpp"
#include "tools/stats_format.hpp"

#ifndef UMA_VERSION
#define UMA_VERSION "unknown"
#endif

namespace uma::cli {

namespace {

/// "yes" or "no ", padded to one width so the meanings after it line up.
[[nodiscard]] const char* yes_no(bool value) noexcept {
  return value ? "yes" : "no ";
}

/// "driver 13.0, runtime 13.0" out of the CUDA backend's description; empty when it has none.
[[nodiscard]] std::string versions_in(const std::string& description) {
  const auto at = description.find("driver ");
  if (at == std::string::npos)
    return {};
  const auto end = description.find(';', at);
  return description.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

void print_device(std::ostream& out, const device_capabilities& caps) {
  out << "device " << caps.ordinal << ": " << caps.name << ", compute capability "
      << caps.compute_major << "." << caps.compute_minor << ", " << human_bytes(caps.total_memory)
      << ", closest host NUMA node "
      << (caps.host_numa_id >= 0 ? std::to_string(caps.host_numa_id) : std::string("none")) << "\n";
  const struct {
    const char* name;
    bool value;
    const char* meaning;
  } rows[] = {
      {"managed_memory", caps.managed_memory, "the device can use managed memory"},
      {"concurrent_managed_access", caps.concurrent_managed_access,
       "CPU and GPU may touch managed memory at the same time"},
      {"pageable_memory_access", caps.pageable_memory_access,
       "the GPU reaches pageable CPU memory (HMM or ATS)"},
      {"pageable_uses_host_page_tables", caps.pageable_uses_host_page_tables,
       "... through the host's page tables (ATS)"},
      {"host_native_atomics", caps.host_native_atomics, "CPU/GPU atomics on shared memory"},
      {"direct_managed_access_from_host", caps.direct_managed_access_from_host,
       "the CPU reads GPU-resident managed memory in place"},
      {"memory_pools", caps.memory_pools, "stream-ordered allocation (cudaMallocAsync)"},
      {"batch_api", caps.batch_api, "batch prefetch/discard entry points in use"},
  };
  for (const auto& row : rows) {
    std::string name = row.name;
    name.resize(33, ' ');
    out << "  " << name << yes_no(row.value) << "  " << row.meaning << "\n";
  }
  out << "  memory model: " << verdict(caps) << "\n";
}

/// The host backend's devices: emulated, never GPUs (docs/design.md "Backends").
void print_emulated(std::ostream& out, const backend& b) {
  if (b.device_count() == 0)
    out << "devices: none (--host-devices 0)\n";
  else
    out << "devices: " << b.device_count()
        << " emulated (no GPU: prefetch, advice and plans to them are recorded and counted, no "
           "data is copied; --host-devices N[:BYTES])\n";
  for (int ordinal = 0; ordinal < b.device_count(); ++ordinal) {
    const auto& caps = b.capabilities(ordinal);
    out << "device " << caps.ordinal << ": " << caps.name << ", " << human_bytes(caps.total_memory)
        << " (system memory)\n";
  }
  out << "memory model: " << host_backend_verdict << "\n";
}

}  // namespace

const char* version() noexcept {
  return UMA_VERSION;
}

int run_info(const options& o) {
  const auto backend = make_backend(o.backend, o.host_devices);
  auto& out = std::cout;
  out << "uma " << version() << ", CUDA backend "
      << (cuda_backend_compiled() ? "compiled in" : "not compiled in") << "\n";
  out << "backend: " << to_string(backend->kind()) << " (--backend " << to_string(o.backend)
      << ")\n";
  const std::string description = backend->description();
  out << "  " << description << "\n";
  if (backend->kind() == backend_kind::host) {
    const auto probe = probe_cuda();
    out << "cuda: "
        << (probe.usable ? "usable, " + std::to_string(probe.device_count) +
                               " device(s), not chosen (--backend host)"
                         : "not usable: " + probe.reason)
        << "\n";
  }
  const auto versions = versions_in(description);
  out << "versions: " << (versions.empty() ? "no CUDA driver or runtime in use" : versions) << "\n";
  out << "host: " << backend->host_numa_nodes() << " NUMA node(s), allocations aligned to "
      << backend->guaranteed_alignment() << " bytes, default quota "
      << human_bytes(backend->default_quota()) << "\n";
  if (backend->kind() == backend_kind::host) {
    print_emulated(out, *backend);
    return exit_ok;
  }
  out << "devices: " << backend->device_count() << "\n";
  for (int ordinal = 0; ordinal < backend->device_count(); ++ordinal)
    print_device(out, backend->capabilities(ordinal));
  return exit_ok;
}

}  // namespace uma::cli
