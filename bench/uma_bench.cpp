// uma_bench: the benchmark suite. Every figure is printed with a baseline measured in the same
// run and their ratio; `--json` writes all of it, `--plot-data` the curves for bench/plot.gp.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/config_value.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

#include <uma/messages/register_types.hpp>
#include <uma/sys/cuda_backend.hpp>
#include <uma/sys/error.hpp>
#include "bench/bench_context.hpp"
#include "bench/cuda_ops.hpp"

namespace {

using namespace uma;
using namespace uma::bench;

struct bench_config : caf::actor_system_config {
  explicit bench_config(const options& opt) {
    register_types(*this);
    if (opt.caf_threads > 0)
      set("scheduler.max-threads", static_cast<caf::config_value::integer>(opt.caf_threads));
    if (!opt.caf_policy.empty())
      set("scheduler.policy", caf::atom_from_string(opt.caf_policy));
    if (opt.caf_moderate_sleep_us >= 0)
      set("work-stealing.moderate-sleep-duration",
          caf::timespan{std::chrono::microseconds{opt.caf_moderate_sleep_us}});
  }
};

/// The CAF settings an experiment changed, for the header.
std::string caf_settings(const options& opt) {
  std::string s;
  if (!opt.caf_policy.empty())
    s += " scheduler.policy=" + opt.caf_policy;
  if (opt.caf_moderate_sleep_us >= 0)
    s += " work-stealing.moderate-sleep-duration=" + std::to_string(opt.caf_moderate_sleep_us) +
         "us";
  return s.empty() ? "CAF defaults" : s.substr(1);
}

struct section_entry {
  int id;
  const char* title;
  void (*run)(context&, section&);
  bool needs_cuda;
};

constexpr section_entry sections[] = {
    {1, "allocate+release latency, 256 B .. 64 MiB (median, p99)", &run_alloc_latency, false},
    {2, "allocate+release throughput, 64 KiB, 1..16 client actors", &run_throughput, false},
    {3, "prefetch 1 GiB host <-> device 0: uma vs raw vs pinned memcpy", &run_prefetch_bandwidth,
     true},
    {4, "1024 x 64 KiB pooled refs prefetched: one message vs one each vs raw",
     &run_pooled_prefetch, true},
    {5, "redundant SetAccessedBy: uma vs raw", &run_redundant_advice, true},
    {6, "stats latency while a 4 GiB prefetch is in flight", &run_stats_under_load, true},
    {7, "kernel read bandwidth: uma-prefetched region vs cudaMalloc", &run_kernel_read, true},
    {8, "stop with live refs: 100k pooled refs, 10k direct regions", &run_stop, false},
};

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  return gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("?");
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  if (!f) {
    std::cerr << "uma_bench: cannot write " << path << "\n";
    return false;
  }
  std::cout << "wrote " << path << "\n";
  return true;
}

int run(const options& opt) {
  bench_config cfg{opt};
  caf::actor_system sys{cfg};
  report out(std::cout);
  std::shared_ptr<backend> b;
  try {
    b = make_backend(opt.backend);
  } catch (const error& e) {
    std::cerr << "uma_bench: " << to_string(e.code()) << ": " << e.what() << "\n";
    return 1;
  }
  context ctx{opt, sys, out, b};
  ctx.cuda = b->kind() == backend_kind::cuda && cuda::compiled();
  if (!cuda::compiled()) {
    ctx.no_cuda_reason = "no CUDA (uma_bench was built without the CUDA toolkit)";
  } else if (!ctx.cuda) {
    const auto probe = probe_cuda();
    ctx.no_cuda_reason = "host backend (" +
                         std::string(opt.backend == backend_choice::host
                                         ? "--backend host"
                                         : "no usable CUDA device: " + probe.reason) +
                         ")";
  }
  if (ctx.cuda) {
    const auto mem = cuda::mem_info();
    ctx.budget = std::min<std::uint64_t>(max_total_bytes, mem.free / 2);
    ctx.stream = cuda::create_stream();
    out.meta("device memory", size_text(mem.free) + " free of " + size_text(mem.total));
  } else {
    ctx.budget = std::min<std::uint64_t>(max_total_bytes, b->default_quota());
  }
  out.meta("backend", b->description());
  out.meta("budget", size_text(ctx.budget) + " (most bytes a section holds; allocator quota)");
  out.meta("mode", opt.smoke ? "smoke (tiny sizes; figures mean nothing)" : "full");
  out.meta("iterations",
           std::to_string(opt.samples()) + " timed, " + std::to_string(opt.warmups()) + " warm-up");
  out.meta("throughput point", number_text(opt.point_seconds()) + " s");
  out.meta("CAF scheduler threads", std::to_string(sys.scheduler().num_workers()));
  out.meta("CAF scheduler", caf_settings(opt));
  out.meta("allocator thread", opt.detached ? "detached (its own thread)" : "CAF scheduler");
  if (!opt.policy.empty())
    out.meta("policy", opt.policy + " only (sections 1, 2)");
  out.meta("hardware threads", std::to_string(std::thread::hardware_concurrency()));
  out.meta("host", host_name());
  out.meta("started", utc_now());
  out.print_header();

  for (const auto& entry : sections) {
    if (!opt.runs(entry.id))
      continue;
    section& s = out.begin(entry.id, entry.title);
    if (entry.needs_cuda && !ctx.cuda) {
      s.status = "skipped: " + ctx.no_cuda_reason;
    } else {
      try {
        entry.run(ctx, s);
      } catch (const std::exception& e) {
        s.status = std::string("failed: ") + e.what();
        out.fail("section " + std::to_string(entry.id) + ": " + e.what());
      }
    }
    out.end(s);
  }

  const auto counters = b->counters();
  if (counters.live_allocations != 0 || counters.bad_frees != 0)
    out.fail("at the end: the backend holds " + std::to_string(counters.live_allocations) +
             " live allocations and counted " + std::to_string(counters.bad_frees) +
             " bad frees (expected none)");
  out.print_targets();
  cuda::destroy_stream(ctx.stream);

  bool written = true;
  if (!opt.json_path.empty())
    written = write_file(opt.json_path, out.json()) && written;
  if (!opt.plot_path.empty())
    written = write_file(opt.plot_path, out.plot_data()) && written;
  std::cout << "uma_bench: done, " << (out.failed() ? "FAILED" : "no failures") << "\n";
  return out.failed() || !written ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string error;
  const auto opt = parse_options(std::vector<std::string>(argv + 1, argv + argc), error);
  if (!opt) {
    std::cerr << "uma_bench: " << error << "\n" << usage();
    return 2;
  }
  if (opt->help) {
    std::cout << usage();
    return 0;
  }
  try {
    return run(*opt);
  } catch (const std::exception& e) {
    std::cerr << "uma_bench: " << e.what() << "\n";
    return 1;
  }
}
