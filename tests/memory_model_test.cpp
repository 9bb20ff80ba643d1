#include <gtest/gtest.h>

#include "tools/memory_model.hpp"

namespace uma::cli {
namespace {

/// A Hopper-class PCIe card on x86 without HMM: the common discrete case.
device_capabilities discrete() {
  device_capabilities c;
  c.ordinal = 0;
  c.name = "discrete";
  c.managed_memory = true;
  c.concurrent_managed_access = true;
  return c;
}

TEST(MemoryModel, DiscreteGpuWithoutHmmMigratesManagedMemoryAndCannotReachCpuMemory) {
  const auto m = classify(discrete());
  EXPECT_EQ(m.system, memory_system::discrete_without_hmm);
  EXPECT_EQ(verdict(discrete()),
            "discrete GPU without HMM: GPU access to CPU memory: no; CPU access to GPU-resident "
            "managed memory: via migration; CPU/GPU atomics: no");
}

TEST(MemoryModel, HmmLetsTheGpuReachPageableMemoryWithoutHostPageTables) {
  auto c = discrete();
  c.pageable_memory_access = true;
  const auto m = classify(c);
  EXPECT_EQ(m.system, memory_system::discrete_with_hmm);
  EXPECT_EQ(m.gpu_to_cpu_memory, "yes (HMM)");
  EXPECT_EQ(m.cpu_to_gpu_managed, "via migration");
}

TEST(MemoryModel, GraceHopperStyleAtsWithDirectHostAccessIsCoherent) {
  auto c = discrete();
  c.pageable_memory_access = true;
  c.pageable_uses_host_page_tables = true;
  c.direct_managed_access_from_host = true;
  c.host_native_atomics = true;
  const auto m = classify(c);
  EXPECT_EQ(m.system, memory_system::coherent_ats);
  EXPECT_EQ(m.gpu_to_cpu_memory, "yes (ATS)");
  EXPECT_EQ(m.cpu_to_gpu_managed, "direct");
  EXPECT_EQ(m.cpu_gpu_atomics, "yes");
}

TEST(MemoryModel, AtsWithoutDirectHostAccessStillMigratesManagedMemoryToTheCpu) {
  // As Warp warns for GB10-class systems: ATS does not imply CPU access to GPU memory.
  auto c = discrete();
  c.pageable_memory_access = true;
  c.pageable_uses_host_page_tables = true;
  c.host_native_atomics = true;
  const auto m = classify(c);
  EXPECT_EQ(m.system, memory_system::ats_host_page_tables);
  EXPECT_EQ(m.cpu_to_gpu_managed, "via migration");
}

TEST(MemoryModel, WithoutConcurrentAccessTheCpuMustWaitForKernels) {
  auto c = discrete();
  c.concurrent_managed_access = false;
  const auto m = classify(c);
  EXPECT_EQ(m.system, memory_system::no_concurrent_access);
  EXPECT_EQ(m.cpu_to_gpu_managed, "via migration, only while no kernel runs");
}

TEST(MemoryModel, ADeviceWithoutManagedMemorySaysSo) {
  device_capabilities c;
  const auto m = classify(c);
  EXPECT_EQ(m.system, memory_system::no_managed_memory);
  EXPECT_EQ(m.cpu_to_gpu_managed, "no (no managed memory)");
}

TEST(MemoryModel, TheHostBackendVerdictNamesSystemMemory) {
  EXPECT_EQ(host_backend_verdict, "host backend: no GPU; managed memory is system memory");
}

}  // namespace
}  // namespace uma::cli
