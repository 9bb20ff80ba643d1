// uma_residency_bench (issue 15): a working set 2x and 3x a device budget streamed by a kernel
// for several passes, read-only and read-write, and an iterative pattern (read one step, write
// the next, the same plans every iteration), through uma's access plans with `auto` and each
// static policy, against baselines of the same run:
//   the in-memory ceiling (the whole set resident, the kernel alone),
//   the link (one raw cudaMemPrefetchAsync of the whole set host -> device, then back),
//   a hand-written window (per chunk: prefetch to the device, kernel, prefetch back; one stream).
// Effective GB/s = set bytes x passes / wall time. During every uma run the device memory in
// use (cudaMemGetInfo, less what was in use before) and uma's account are sampled after each
// step: the report gives their maxima against the budget, and a thread asking for the
// allocator's stats all along gives the stats latency's p99.
//
//   uma_residency_bench [--budget-mib N] [--chunk-mib N] [--factors 2,3] [--passes N]
//                       [--pass-limit-s S] [--lookahead N] [--ledger ROUNDS] [--smoke]
// --ledger: only the migration ledger's overhead: ROUNDS runs each with the driver counters
// (CUPTI) off and on, alternating (iterative, auto, 2x the budget, a report scraped every 50 ms).
// --lookahead: plans sent ahead of the running step (access_sequence; default 1).
// A uma run whose pass takes longer than S seconds (default 20) stops after it, saying so.
//
// Needs a CUDA device (the kernels); elsewhere it says so and exits 0. The sum of managed
// memory stays at the set of one factor (at most 3 x the budget) plus nothing else.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/access_sequence.hpp>
#include <uma/actors/allocator_config.hpp>
#include <uma/actors/client.hpp>
#include <uma/messages/register_types.hpp>
#include <uma/sys/cuda_backend.hpp>
#include "bench/bench_actors.hpp"
#include "bench/cuda_ops.hpp"

namespace {

namespace cu = uma::bench::cuda;
using clock_type = std::chrono::steady_clock;
constexpr std::size_t MiB = std::size_t{1} << 20;

struct options {
  std::size_t budget = 2048 * MiB;
  std::size_t chunk = 256 * MiB;
  std::vector<int> factors{2, 3};
  int passes = 3;
  double pass_limit_s = 20;
  std::size_t lookahead = 1;
  int ledger_rounds = 0;         // --ledger N: the overhead rounds (0: none)
  bool driver_counters = false;  // a uma run with the ledger's driver half on
  int scrape_ms = 0;             // > 0: a scraper asks for the residency report this often
};

enum class pattern { read, write, iterative };

const char* name_of(pattern p) {
  return p == pattern::read ? "read-only" : p == pattern::write ? "read-write" : "iterative";
}
uma::access_mode mode_of(pattern p, std::size_t step) {
  if (p == pattern::iterative)
    return step % 2 == 0 ? uma::access_mode::read : uma::access_mode::write;
  return p == pattern::read ? uma::access_mode::read : uma::access_mode::write;
}
void kernel(void* ptr, std::size_t bytes, uma::access_mode m, void* stream) {
  if (m == uma::access_mode::read)
    cu::read_async(ptr, bytes, stream);
  else
    cu::add_one_async(ptr, bytes, stream);
}
double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}
/// GB/s of `bytes` streamed since `t0`.
double gbps_since(double bytes, clock_type::time_point t0) {
  return bytes / seconds_since(t0) / 1e9;
}
double used_bytes() {
  const auto m = cu::mem_info();
  return static_cast<double>(m.total - m.free);
}

struct row {
  std::string name;
  double gbps = 0;
  std::vector<double> pass_gbps;
  std::string note;
};

/// The baselines, on one raw managed buffer of the set's size (freed before uma's runs).
std::vector<row> baselines(const options& o, std::size_t set, pattern p, void* stream) {
  std::vector<row> out;
  const std::size_t chunks = set / o.chunk;
  void* raw = cu::malloc_managed(set);
  auto* base = static_cast<std::byte*>(raw);
  try {
    cu::fill(raw, set, 7, stream);
    cu::prefetch(raw, set, cu::host_location, stream);
    cu::synchronize(stream);
    auto t0 = clock_type::now();
    cu::prefetch(raw, set, 0, stream);
    cu::synchronize(stream);
    out.push_back({"link: raw prefetch of the set host -> device",
                   gbps_since(static_cast<double>(set), t0),
                   {},
                   ""});
    t0 = clock_type::now();  // the set is resident: the ceiling
    for (int pass = 0; pass < o.passes; ++pass)
      for (std::size_t i = 0; i < chunks; ++i)
        kernel(base + i * o.chunk, o.chunk, mode_of(p, i), stream);
    cu::synchronize(stream);
    out.push_back({"ceiling: the whole set resident",
                   gbps_since(static_cast<double>(set) * o.passes, t0),
                   {},
                   ""});
    t0 = clock_type::now();
    cu::prefetch(raw, set, cu::host_location, stream);
    cu::synchronize(stream);
    out.push_back({"link: raw prefetch of the set device -> host",
                   gbps_since(static_cast<double>(set), t0),
                   {},
                   "information"});
    row window{"hand-written window (prefetch, kernel, prefetch back)", 0, {}, ""};
    t0 = clock_type::now();
    for (int pass = 0; pass < o.passes; ++pass) {
      const auto tp = clock_type::now();
      for (std::size_t i = 0; i < chunks; ++i) {
        auto* c = base + i * o.chunk;
        cu::prefetch(c, o.chunk, 0, stream);
        kernel(c, o.chunk, mode_of(p, i), stream);
        cu::prefetch(c, o.chunk, cu::host_location, stream);
      }
      cu::synchronize(stream);
      window.pass_gbps.push_back(gbps_since(static_cast<double>(set), tp));
    }
    window.gbps = gbps_since(static_cast<double>(set) * o.passes, t0);
    out.push_back(window);
  } catch (...) {
    cu::free_managed(raw);
    throw;
  }
  cu::free_managed(raw);
  return out;
}

/// One uma run: a fresh allocator with the budget, the set in chunks on the host, an
/// access_sequence over the chunks with `policy`, the kernel per step.
row uma_run(caf::actor_system& sys, const options& o, std::size_t set, pattern p,
            uma::residency_policy policy, void* stream) {
  uma::allocator_config ac;
  ac.backend.choice = uma::backend_choice::cuda;
  ac.memory.quota_bytes = set + o.budget;
  ac.backend.driver_counters = o.driver_counters;
  uma::client c(sys, ac);
  c.device_budget(0, o.budget);
  const std::size_t chunks = set / o.chunk;
  std::vector<uma::ManagedRef<std::byte>> data;
  std::vector<uma::access_step> steps;
  for (std::size_t i = 0; i < chunks; ++i) {
    data.push_back(c.allocate<std::byte>(o.chunk));
    cu::fill(data.back().data(), o.chunk, static_cast<std::uint32_t>(i), stream);
    cu::prefetch(data.back().data(), o.chunk, cu::host_location, stream);
    uma::access_step s;
    s.refs.push_back(uma::client::erase(data.back()));
    s.mode = mode_of(p, i);
    s.policy = policy;
    steps.push_back(std::move(s));
  }
  cu::synchronize(stream);
  const double before = used_bytes();
  // A monitoring actor asking for the allocator's stats all along, one request in flight
  // (request(...).then(...): what an actor pays, without a scoped actor's own cost).
  std::atomic<bool> done{false};
  uma::bench::chain_limits lim;
  lim.stop = &done;
  auto stats = std::make_shared<uma::bench::chain_result>();
  const std::vector<caf::actor> monitor{uma::bench::spawn_chain<uma::allocator_stats>(
      sys, c.handle(), lim, stats, uma::stats_atom_v)};
  // A scraper (what the metrics endpoint does on each scrape), every scrape_ms: the residency
  // report, and with it the driver's records taken in.
  std::vector<double> scrape_ms;
  std::thread scraper;
  if (o.scrape_ms > 0)
    scraper = std::thread([&] {
      caf::scoped_actor self{sys};
      while (!done) {
        const auto t = clock_type::now();
        self->request(c.handle(), caf::infinite, uma::residency_atom_v)
            .receive([](uma::residency_report&) {}, [](caf::error&) {});
        scrape_ms.push_back(seconds_since(t) * 1e3);
        std::this_thread::sleep_until(t + std::chrono::milliseconds(o.scrape_ms));
      }
    });
  row r{std::string("uma ") + std::string(uma::to_string(policy)), 0, {}, ""};
  double max_used = 0;
  std::size_t steps_done = 0;
  const auto t0 = clock_type::now();
  {
    uma::access_sequence seq(c, steps, o.lookahead);
    bool over = false;
    for (int pass = 0; pass < o.passes && !over; ++pass) {
      const auto tp = clock_type::now();
      for (std::size_t i = 0; i < chunks && !over; ++i) {
        (void)seq.begin(static_cast<std::size_t>(pass) * chunks + i);
        kernel(data[i].data(), o.chunk, mode_of(p, i), stream);
        cu::synchronize(stream);
        max_used = std::max(max_used, used_bytes() - before);
        ++steps_done;
        // A pathological pairing (written read-mostly data) can take minutes: it stops here.
        over = seconds_since(tp) > o.pass_limit_s;
      }
      if (!over)
        r.pass_gbps.push_back(gbps_since(static_cast<double>(set), tp));
    }
    seq.finish();
  }
  r.gbps = gbps_since(static_cast<double>(steps_done * o.chunk), t0);
  if (steps_done < chunks * static_cast<std::size_t>(o.passes))
    r.note = "stopped after " + std::to_string(steps_done) + " steps: a pass passed " +
             std::to_string(static_cast<int>(o.pass_limit_s)) + " s; ";
  done = true;
  uma::bench::wait_all(sys, monitor);
  if (scraper.joinable())
    scraper.join();
  auto& stats_ns = stats->ns;
  std::sort(stats_ns.begin(), stats_ns.end());
  const double p99_us = stats_ns.empty() ? 0 : stats_ns[stats_ns.size() * 99 / 100] / 1e3;
  const auto report = c.residency();  // its peak: the account's maximum over the run
  char note[256];
  std::snprintf(note, sizeof note,
                "device use max %.0f MiB, account peak %zu MiB (budget %zu, chunk %zu); moved "
                "%.1f GiB in, %.1f GiB out; stats p99 %.0f us",
                max_used / MiB, report.devices.at(0).peak / MiB, o.budget / MiB, o.chunk / MiB,
                static_cast<double>(report.totals.to_device_bytes) / (1024.0 * MiB),
                static_cast<double>(report.totals.to_host_bytes) / (1024.0 * MiB), p99_us);
  r.note += note;
  if (!scrape_ms.empty()) {
    std::sort(scrape_ms.begin(), scrape_ms.end());
    std::snprintf(note, sizeof note, "; %zu scrapes, median %.2f ms", scrape_ms.size(),
                  scrape_ms[scrape_ms.size() / 2]);
    r.note += note;
  }
  if (o.driver_counters) {
    const auto& d = report.driver_totals;
    std::snprintf(note, sizeof note,
                  "; driver (%s): %.1f GiB in (%.1f by prefetch), %.1f GiB out, %llu GPU fault "
                  "groups, %.1f GiB unattributed, %llu records dropped",
                  report.driver_counters_on ? "on" : report.driver_counters.c_str(),
                  static_cast<double>(d.to_device_bytes) / (1024.0 * MiB),
                  static_cast<double>(d.prefetched_to_device_bytes) / (1024.0 * MiB),
                  static_cast<double>(d.to_host_bytes) / (1024.0 * MiB),
                  static_cast<unsigned long long>(d.gpu_page_faults),
                  static_cast<double>(report.driver_unattributed.to_device_bytes +
                                      report.driver_unattributed.to_host_bytes) /
                      (1024.0 * MiB),
                  static_cast<unsigned long long>(report.driver_records_dropped));
    r.note += note;
  }
  if (max_used > static_cast<double>(o.budget + o.chunk) + 32.0 * MiB)
    r.note += "; OVER the budget by more than one chunk";
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void print(const std::vector<row>& rows, double link) {
  for (const auto& r : rows) {
    std::string passes;
    for (double g : r.pass_gbps) {
      char one[32];
      std::snprintf(one, sizeof one, passes.empty() ? "%.1f" : " %.1f", g);
      passes += one;
    }
    std::printf("  %-58s %8.2f GB/s  x link %5.2f  passes [%s]  %s\n", r.name.c_str(), r.gbps,
                link > 0 ? r.gbps / link : 0.0, passes.c_str(), r.note.c_str());
  }
}

/// The migration ledger's cost: the iterative pattern at 2x the budget with `auto`, a scraper
/// asking for the residency report every 50 ms (20x Prometheus' most eager usual interval),
/// rounds alternating the driver counters off and on.
void ledger_overhead(caf::actor_system& sys, options o, void* stream) {
  const std::size_t set = 2 * o.budget;
  o.scrape_ms = 50;
  std::printf(
      "== ledger overhead: set 2x the budget (%zu MiB), iterative, auto, %d rounds "
      "alternating the driver counters off / on\n",
      set / MiB, o.ledger_rounds);
  std::vector<double> off, on, steady_off, steady_on;  // whole runs; passes after the first two
  for (int round = 0; round < o.ledger_rounds; ++round) {
    for (bool counters : {false, true}) {
      o.driver_counters = counters;
      auto r = uma_run(sys, o, set, pattern::iterative, uma::residency_policy::automatic, stream);
      r.name += counters ? ", driver counters on" : ", driver counters off";
      print({r}, 0);
      (counters ? on : off).push_back(r.gbps);
      for (std::size_t k = 2; k < r.pass_gbps.size(); ++k)
        (counters ? steady_on : steady_off).push_back(r.pass_gbps[k]);
    }
  }
  const auto compare = [](const char* what, const std::vector<double>& a,
                          const std::vector<double>& b) {
    const double m_off = median(a);
    const double m_on = median(b);
    std::printf(
        "  ledger, %s: median %.2f GB/s off, %.2f GB/s on: a step takes %.2f%% longer "
        "with the driver counters on\n",
        what, m_off, m_on, m_on > 0 ? (m_off / m_on - 1) * 100 : 0.0);
  };
  compare("whole runs", off, on);
  compare("passes after the first two", steady_off, steady_on);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each row as it comes, also into a file
  options o;
  bool smoke = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--budget-mib" && more)
      o.budget = std::strtoull(argv[++i], nullptr, 10) * MiB;
    else if (a == "--chunk-mib" && more)
      o.chunk = std::strtoull(argv[++i], nullptr, 10) * MiB;
    else if (a == "--passes" && more)
      o.passes = std::atoi(argv[++i]);
    else if (a == "--pass-limit-s" && more)
      o.pass_limit_s = std::atof(argv[++i]);
    else if (a == "--lookahead" && more)
      o.lookahead = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--ledger" && more)
      o.ledger_rounds = std::atoi(argv[++i]);
    else if (a == "--factors" && more) {
      o.factors.clear();
      const std::string list = argv[++i];
      for (std::size_t at = 0; at <= list.size();) {
        const auto comma = std::min(list.find(',', at), list.size());
        o.factors.push_back(std::atoi(list.substr(at, comma - at).c_str()));  // 0: refused below
        at = comma + 1;
      }
    } else if (a == "--smoke")
      smoke = true;
    else {
      std::fprintf(stderr,
                   "usage: uma_residency_bench [--budget-mib N] [--chunk-mib N] "
                   "[--factors 2,3] [--passes N] [--pass-limit-s S] [--lookahead N] "
                   "[--ledger ROUNDS] [--smoke]\n");
      return 2;
    }
  }
  if (smoke) {
    o.budget = 64 * MiB;
    o.chunk = 16 * MiB;
    o.factors = {2};
    o.passes = 2;
  }
  const bool factors_ok = !o.factors.empty() && std::all_of(o.factors.begin(), o.factors.end(),
                                                            [](int f) { return f >= 1 && f <= 4; });
  if (o.chunk == 0 || o.chunk % (2 * MiB) != 0 || o.budget < 2 * o.chunk || o.passes < 1 ||
      o.passes > 100 || !factors_ok || !(o.pass_limit_s > 0) || o.ledger_rounds < 0 ||
      o.ledger_rounds > 20 || (o.lookahead + 1) * o.chunk > o.budget) {
    std::fprintf(stderr,
                 "uma_residency_bench: the chunk must be a non-zero multiple of 2 MiB, "
                 "the budget at least two chunks and lookahead + 1 chunks, passes 1 to 100, "
                 "factors 1 to 4, ledger rounds 0 to 20\n");
    return 2;
  }
  if (!cu::compiled() || !uma::probe_cuda().usable) {
    std::printf("uma_residency_bench: skipped: no usable CUDA device (the kernels need one)\n");
    return 0;
  }
  try {
    const auto mem = cu::mem_info();
    const std::size_t largest =
        static_cast<std::size_t>(*std::max_element(o.factors.begin(), o.factors.end()));
    if (largest * o.budget * 2 > mem.free) {
      std::fprintf(stderr,
                   "uma_residency_bench: the largest set (%zu MiB) would pass half the "
                   "device's free memory (%zu MiB): the card must not be oversubscribed\n",
                   largest * o.budget / MiB, mem.free / MiB);
      return 2;
    }
    caf::actor_system_config cfg;
    uma::register_types(cfg);
    caf::actor_system sys{cfg};
    void* stream = cu::create_stream();
    std::printf("uma_residency_bench: budget %zu MiB, chunk %zu MiB, %d passes, lookahead %zu\n",
                o.budget / MiB, o.chunk / MiB, o.passes, o.lookahead);
    if (o.ledger_rounds > 0) {
      ledger_overhead(sys, o, stream);
      o.factors.clear();  // --ledger runs just that
    }
    for (int f : o.factors) {
      const std::size_t set = static_cast<std::size_t>(f) * o.budget;
      for (auto p : {pattern::read, pattern::write, pattern::iterative}) {
        std::printf("== set %dx the budget (%zu MiB), %s\n", f, set / MiB, name_of(p));
        const auto base = baselines(o, set, p, stream);
        print(base, base.front().gbps);
        std::vector<row> rows = base;
        for (auto policy :
             {uma::residency_policy::automatic, uma::residency_policy::migrate,
              uma::residency_policy::read_mostly, uma::residency_policy::remote_map}) {
          rows.push_back(uma_run(sys, o, set, p, policy, stream));
          print({rows.back()}, base.front().gbps);
        }
        double best_static = 0;
        for (std::size_t k = base.size() + 1; k < rows.size(); ++k)
          best_static = std::max(best_static, rows[k].gbps);
        const auto& window = base.back();
        const auto& automatic = rows[base.size()];
        std::printf("  auto: %.2fx the best static policy, %.2fx the hand-written window\n",
                    best_static > 0 ? automatic.gbps / best_static : 0.0,
                    window.gbps > 0 ? automatic.gbps / window.gbps : 0.0);
      }
    }
    cu::destroy_stream(stream);
    std::printf("uma_residency_bench: done\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uma_residency_bench: %s\n", e.what());
    return 1;
  }
}
