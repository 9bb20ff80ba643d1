#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>

#include <uma/actors/allocator_config.hpp>
#include <uma/sys/backend.hpp>
#include "bench/bench_options.hpp"
#include "bench/bench_report.hpp"

namespace uma::bench {

/// Most bytes the benchmark ever keeps alive at once (../shared/GPU.md): each section checks
/// its needs against min(this, half the free device memory) before it allocates anything.
inline constexpr std::uint64_t max_total_bytes = std::uint64_t{16} << 30;

/// What every section works with.
struct context {
  const options& opt;
  caf::actor_system& sys;
  report& out;
  /// Shared by every allocator the benchmark spawns, so its counters prove "nothing leaked".
  std::shared_ptr<uma::backend> backend;
  /// The backend is CUDA and the raw-CUDA baselines are compiled in.
  bool cuda = false;
  /// Why the CUDA-only sections cannot run (empty when they can).
  std::string no_cuda_reason{};
  /// Most bytes a section may hold at once: min(16 GiB, free device memory / 2) on CUDA.
  std::uint64_t budget = 0;
  /// CUDA: a non-blocking stream the uma requests and the raw calls share (null on host).
  void* stream = nullptr;

  /// An allocator of `policy` on the shared backend, with the budget as its quota.
  [[nodiscard]] allocator_config config(allocation_policy policy) const {
    allocator_config c;
    c.backend.instance = backend;
    c.memory.quota_bytes = budget;
    c.memory.policy = policy;
    c.supervision.detached = opt.detached;
    return c;
  }

  /// True when `need` bytes fit the budget; otherwise marks `s` skipped, saying why.
  bool fits(section& s, std::uint64_t need) const {
    if (need <= budget)
      return true;
    s.status = "skipped: needs " + size_text(need) + ", more than the budget of " +
               size_text(budget) + " (min(16 GiB, free device memory / 2))";
    return false;
  }
};

/// Sections 1-8; each fills `s` (figures, notes, status) and the report's targets and curves.
void run_alloc_latency(context& ctx, section& s);
void run_throughput(context& ctx, section& s);
void run_prefetch_bandwidth(context& ctx, section& s);
void run_pooled_prefetch(context& ctx, section& s);
void run_redundant_advice(context& ctx, section& s);
void run_stats_under_load(context& ctx, section& s);
void run_kernel_read(context& ctx, section& s);
void run_stop(context& ctx, section& s);

}  // namespace uma::bench
