// uma_native_bench: 64 KiB allocate+release, median and p99 per pair, 1 and 8 threads, through
// every way a program allocates with uma (issue 13) against the raw CUDA calls in the same run:
//   uma::client facade (the caching layer, CAF defaults), a typed request from an actor (CAF
//   defaults, and scheduler.max-threads=4), the C ABI (uma_malloc/uma_free),
//   raw cudaMallocManaged+cudaFree, CUDA's managed memory pool (cudaMallocFromPoolAsync).
// Ratios are against the baseline of the same run: raw cudaMallocManaged on CUDA, the host
// backend's own allocate+free (mmap/munmap) on the host, where the CUDA rows are skipped with
// the reason.
//
//   uma_native_bench [--backend auto|host|cuda] [--pairs N] [--workers N,...] [--only-actors]
//                    [--smoke] [--facade]
// --workers: scheduler.max-threads of the actor rows' systems, 0 for CAF's defaults, 'tuned'
//            for CAF's defaults with uma::tune_scheduler (0,tuned,4); with --facade, 'tuned'
//            alone runs the facade's rows on the tuned scheduler.
// --only-actors: the event-based actor rows alone, without baselines (for a profiler).
// --facade: each blocking facade call that is a message beside the event-based request and the
//           backend's own call, 1 and 8 threads, then 8 event-based clients (bench_facade.cpp);
//           --pairs sets the calls per thread (default 10000).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/c/uma.h>
#include <uma/actors/client.hpp>
#include <uma/actors/managed_allocator.hpp>
#include <uma/actors/scheduler_tuning.hpp>
#include <uma/messages/register_types.hpp>
#include "bench/bench_actors.hpp"
#include "bench/bench_facade.hpp"
#include "bench/cuda_ops.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::size_t block = 64 * 1024;

struct row {
  std::string name;
  int threads = 1;
  double median_ns = 0;
  double p99_ns = 0;
  double mpairs_per_s = 0;
  std::string note;
};

double percentile(std::vector<double>& v, double q) {
  if (v.empty())
    return 0;
  const auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

/// Runs `pair(thread)` `pairs` times on each of `threads` threads (after a warm-up of a tenth),
/// timing every pair; false from a pair fails the row.
row measure(const std::string& name, int threads, int pairs, const std::function<bool(int)>& pair) {
  std::vector<std::vector<double>> per(static_cast<std::size_t>(threads));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, failed{false};
  std::vector<std::thread> pool;
  clock_type::time_point start, end;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto& ns = per[static_cast<std::size_t>(t)];
      ns.reserve(static_cast<std::size_t>(pairs));
      for (int i = 0; i < pairs / 10; ++i)
        if (!pair(t))
          failed = true;
      ++ready;
      while (!go.load())
        std::this_thread::yield();
      for (int i = 0; i < pairs; ++i) {
        const auto t0 = clock_type::now();
        if (!pair(t))
          failed = true;
        ns.push_back(std::chrono::duration<double, std::nano>(clock_type::now() - t0).count());
      }
    });
  while (ready.load() != threads)
    std::this_thread::yield();
  start = clock_type::now();
  go = true;
  for (auto& th : pool)
    th.join();
  end = clock_type::now();
  std::vector<double> all;
  for (auto& v : per)
    all.insert(all.end(), v.begin(), v.end());
  row r{name, threads, 0, 0, 0, {}};
  r.median_ns = percentile(all, 0.5);
  r.p99_ns = percentile(all, 0.99);
  const double s = std::chrono::duration<double>(end - start).count();
  r.mpairs_per_s = static_cast<double>(all.size()) / s / 1e6;
  if (failed)
    r.note = "FAILED: a pair did not complete";
  return r;
}

/// `tuned`: CAF's defaults with uma::tune_scheduler (actors/scheduler_tuning.hpp).
constexpr int tuned = -1;

struct uma_system_config : caf::actor_system_config {
  explicit uma_system_config(int max_threads) {
    uma::register_types(*this);
    if (max_threads == tuned)
      uma::tune_scheduler(*this);
    else if (max_threads > 0)
      set("scheduler.max-threads", static_cast<caf::config_value::integer>(max_threads));
  }
};

std::string workers_name(int max_threads) {
  if (max_threads == 0)
    return "CAF defaults";
  if (max_threads == tuned)
    return "tuned scheduler";
  return std::to_string(max_threads) + " workers";
}

std::vector<row> facade_rows(uma::backend_choice choice, int pairs) {
  uma_system_config cfg(0);  // CAF defaults: nothing set
  caf::actor_system sys{cfg};
  uma::allocator_config ac;
  ac.backend.choice = choice;
  uma::client c(sys, ac);
  std::vector<row> out;
  for (int threads : {1, 8})
    out.push_back(measure("uma::client facade (CAF defaults)", threads, pairs, [&](int) {
      auto ref = c.allocate<std::byte>(block);
      return ref.valid();
    }));
  const auto s = c.blocks()->stats();
  out.back().note = "cache hits " + std::to_string(s.hits) + ", misses " + std::to_string(s.misses);
  return out;
}

/// CAF alone: request/response round trips between two plain actors (an int echoed), the shape
/// of the typed-request rows with no uma in it: the floor CAF's messaging puts under them.
struct ping_state {
  caf::actor echo;
  int left = 0;
  int warmup = 0;
  clock_type::time_point t0;
  std::shared_ptr<std::vector<double>> out;
};

void ping_next(caf::stateful_actor<ping_state>* self) {
  auto& st = self->state;
  if (st.left-- <= 0)
    return;
  st.t0 = clock_type::now();
  self->request(st.echo, caf::infinite, 1).then([self](int) {
    auto& st = self->state;
    const double ns = std::chrono::duration<double, std::nano>(clock_type::now() - st.t0).count();
    if (st.warmup > 0)
      --st.warmup;
    else
      st.out->push_back(ns);
    ping_next(self);
  });
}

void ping_actor(caf::stateful_actor<ping_state>* self, caf::actor echo, int n,
                std::shared_ptr<std::vector<double>> out) {
  self->state.echo = std::move(echo);
  self->state.warmup = n / 10;
  self->state.left = n + n / 10;
  self->state.out = std::move(out);
  ping_next(self);
}

// The unused argument: CAF 0.17 dereferences a null argument tuple when a function-based actor
// is spawned with none (a UBSan report).
caf::behavior echo_actor(caf::event_based_actor*, int) {
  return {[](int x) { return x; }};
}

row caf_ping_row(caf::actor_system& sys, int n, const std::string& workers) {
  auto out = std::make_shared<std::vector<double>>();
  out->reserve(static_cast<std::size_t>(n));
  const auto echo = sys.spawn(echo_actor, 0);
  const auto start = clock_type::now();
  const std::vector<caf::actor> chain{sys.spawn(ping_actor, echo, n, out)};
  uma::bench::wait_all(sys, chain);
  const double s = std::chrono::duration<double>(clock_type::now() - start).count();
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  return row{"CAF alone: int request/response (" + workers + ")",
             1,
             percentile(*out, 0.5),
             percentile(*out, 0.99),
             static_cast<double>(out->size()) / s / 1e6,
             "no uma: the floor under the rows above"};
}

/// `threads` chains of typed allocate requests to `target`, one request in flight each, `n`
/// timed pairs per chain: the pairs' median and p99, and pairs per second of wall time.
row chain_row(caf::actor_system& sys, const uma::managed_allocator_actor& target,
              const std::string& name, int threads, int n, const uma::allocate_request& r) {
  uma::bench::chain_limits lim;
  lim.warmup = static_cast<std::size_t>(n / 10);
  lim.samples = static_cast<std::size_t>(n);
  std::vector<std::shared_ptr<uma::bench::chain_result>> results;
  std::vector<caf::actor> chains;
  const auto start = clock_type::now();
  for (int t = 0; t < threads; ++t) {
    results.push_back(std::make_shared<uma::bench::chain_result>());
    chains.push_back(uma::bench::spawn_chain<uma::byte_ref>(sys, target, lim, results.back(),
                                                            uma::allocate_atom_v, r));
  }
  uma::bench::wait_all(sys, chains);
  const double s = std::chrono::duration<double>(clock_type::now() - start).count();
  std::vector<double> all;
  std::string note;
  for (auto& res : results) {
    all.insert(all.end(), res->ns.begin(), res->ns.end());
    if (res->error)
      note = "FAILED: " + sys.render(res->error);
  }
  return row{name,
             threads,
             percentile(all, 0.5),
             percentile(all, 0.99),
             static_cast<double>(all.size()) / s / 1e6,
             note};
}

/// Typed requests from event-based actors (`request(...).then(...)`, the ref dropped in the
/// handler, so the release is inside the pair): one chain per "thread", each with one request
/// in flight. Then the same from plain threads through a blocking `caf::scoped_actor`.
std::vector<row> actor_rows(uma::backend_choice choice, int pairs, int max_threads, bool scoped) {
  uma_system_config cfg(max_threads);
  caf::actor_system sys{cfg};
  uma::allocator_config ac;
  ac.backend.choice = choice;
  ac.memory.policy = uma::allocation_policy::pool;
  uma::client c(sys, ac);
  c.set_max_block_bytes(0);  // the facade's caching layer aside: every pair is a message
  const auto alloc = c.handle();
  const std::string workers = workers_name(max_threads);
  const int n = std::max(100, pairs / 10);  // a message per pair: fewer pairs
  std::vector<row> out;
  uma::allocate_request r;
  r.count = block;
  r.element_size = 1;
  for (int threads : {1, 8})
    out.push_back(
        chain_row(sys, alloc, "typed request from an actor (" + workers + ")", threads, n, r));
  // The client's handle is its supervisor, which delegates each request to the allocator: one
  // hop more than a bare allocator (spawn_allocator, no restarts). This row prices that hop.
  const auto bare = uma::spawn_allocator(sys, ac);
  out.push_back(chain_row(sys, bare, "typed request, bare allocator (" + workers + ")", 1, n, r));
  caf::anon_send_exit(bare, caf::exit_reason::user_shutdown);
  out.push_back(caf_ping_row(sys, n, workers));
  if (!scoped)  // --only-actors: the event-based rows only
    return out;
  for (int threads : {1, 8}) {
    std::vector<std::unique_ptr<caf::scoped_actor>> selves;
    for (int t = 0; t < threads; ++t)
      selves.push_back(std::make_unique<caf::scoped_actor>(sys));
    out.push_back(
        measure("typed request from a scoped actor (" + workers + ")", threads, n / 2, [&](int t) {
          bool ok = false;
          (*selves[static_cast<std::size_t>(t)])
              ->request(alloc, caf::infinite, uma::allocate_atom_v, r)
              .receive([&](uma::byte_ref& ref) { ok = ref.valid(); }, [&](caf::error&) {});
          return ok;
        }));
  }
  return out;
}

std::vector<row> c_abi_rows(uma::backend_choice choice, int pairs) {
  uma_config cfg;
  uma_config_init(&cfg);
  cfg.backend = choice == uma::backend_choice::host   ? UMA_BACKEND_HOST
                : choice == uma::backend_choice::cuda ? UMA_BACKEND_CUDA
                                                      : UMA_BACKEND_AUTO;
  uma_allocator* a = nullptr;
  if (uma_create(&cfg, &a) != UMA_OK)
    return {row{"C ABI uma_malloc/uma_free", 1, 0, 0, 0, uma_last_error()}};
  std::vector<row> out;
  for (int threads : {1, 8})
    out.push_back(measure("C ABI uma_malloc/uma_free", threads, pairs, [&](int) {
      void* p = nullptr;
      return uma_malloc(a, block, 0, nullptr, &p) == UMA_OK &&
             uma_free(a, p, block, 0, nullptr) == UMA_OK;
    }));
  (void)uma_destroy(a);
  return out;
}

row baseline_host(int pairs) {
  auto b = uma::make_backend(uma::backend_choice::host);
  return measure("host backend allocate+free (mmap/munmap)", 1, pairs, [&](int) {
    b->free_managed(b->allocate_managed(block, uma::attach_flag::global), block);
    return true;
  });
}

row from_samples(const std::string& name, int threads, std::vector<double> ns) {
  row r{name, threads, 0, 0, 0, {}};
  r.median_ns = percentile(ns, 0.5);
  r.p99_ns = percentile(ns, 0.99);
  double total = 0;
  for (double v : ns)
    total += v;
  r.mpairs_per_s = total > 0 ? static_cast<double>(ns.size()) / (total / 1e9) / 1e6 : 0;
  return r;
}

std::vector<row> cuda_rows(int pairs, double limit_s) {
  namespace cu = uma::bench::cuda;
  std::vector<row> out;
  out.push_back(
      from_samples("raw cudaMallocManaged+cudaFree", 1,
                   cu::malloc_managed_pairs(block, pairs / 100, pairs / 10, limit_s, true)));
  const auto t8 = cu::malloc_managed_throughput(block, 8, limit_s);
  out.push_back(row{"raw cudaMallocManaged+cudaFree", 8, 0, 0,
                    static_cast<double>(t8.pairs) / t8.seconds / 1e6, "throughput only"});
  auto pool = cu::create_managed_pool();
  if (pool.handle == nullptr) {
    out.push_back(row{"CUDA managed mempool", 1, 0, 0, 0, "skipped: " + pool.error});
    return out;
  }
  void* stream = cu::create_stream();
  auto r = from_samples("CUDA managed mempool (" + pool.how + ")", 1,
                        cu::mempool_pairs(pool, block, pairs / 10, pairs, limit_s, stream));
  out.push_back(r);
  const auto m8 = cu::mempool_throughput(pool, block, 8, limit_s);
  out.push_back(
      row{r.name, 8, 0, 0, static_cast<double>(m8.pairs) / m8.seconds / 1e6, "throughput only"});
  cu::destroy_stream(stream);
  cu::destroy_managed_pool(pool);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "auto";
  int pairs = 200000;
  bool smoke = false;
  bool only_actors = false;  // --only-actors: the event-based actor rows alone (for profiling)
  bool facade = false;       // --facade: the facade's message path (bench_facade.cpp)
  bool pairs_set = false;
  std::vector<int> worker_counts{0, tuned, 4};  // 0: CAF's defaults
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--backend" && i + 1 < argc)
      backend = argv[++i];
    else if (a == "--pairs" && i + 1 < argc)
      pairs = std::max(100, std::atoi(argv[++i])), pairs_set = true;
    else if (a == "--facade")
      facade = true;
    else if (a == "--smoke")
      smoke = true;
    else if (a == "--only-actors")
      only_actors = true;
    else if (a == "--workers" && i + 1 < argc) {
      worker_counts.clear();
      std::string list = argv[++i];
      for (std::size_t at = 0; at <= list.size();) {
        const auto comma = std::min(list.find(',', at), list.size());
        const auto item = list.substr(at, comma - at);
        const int n = item == "tuned" ? tuned : std::atoi(item.c_str());
        if (n < tuned || n > 256 || (n == 0 && item != "0")) {
          std::fprintf(stderr,
                       "uma_native_bench: --workers wants counts 0 to 256 or 'tuned', got '%s'\n",
                       list.c_str());
          return 2;
        }
        worker_counts.push_back(n);
        at = comma + 1;
      }
    } else {
      std::fprintf(stderr,
                   "usage: uma_native_bench [--backend auto|host|cuda] [--pairs N] "
                   "[--workers N,...] [--only-actors] [--smoke] [--facade]\n");
      return 2;
    }
  }
  if (smoke)
    pairs = 1000;
  const auto choice = uma::parse_backend_choice(backend);
  if (!choice) {
    std::fprintf(stderr, "uma_native_bench: --backend '%s' is not auto, host or cuda\n",
                 backend.c_str());
    return 2;
  }
  try {
    const auto kind = uma::make_backend(*choice)->kind();
    const bool cuda = kind == uma::backend_kind::cuda && uma::bench::cuda::compiled();
    if (facade)
      return uma::bench::run_facade_bench(*choice,
                                          smoke       ? 300
                                          : pairs_set ? pairs
                                                      : 10000,
                                          worker_counts == std::vector<int>{tuned});
    std::vector<row> rows;
    if (only_actors) {
      for (int workers : worker_counts)
        for (auto& r : actor_rows(*choice, pairs, workers, false))
          std::printf("%-48s %7d %11.0f %11.0f %10.3f  %s\n", r.name.c_str(), r.threads,
                      r.median_ns, r.p99_ns, r.mpairs_per_s, r.note.c_str());
      return 0;
    }
    for (auto& r : facade_rows(*choice, pairs))
      rows.push_back(r);
    for (int workers : worker_counts)
      for (auto& r : actor_rows(*choice, pairs, workers, true))
        rows.push_back(r);
    for (auto& r : c_abi_rows(*choice, pairs))
      rows.push_back(r);
    row base;
    if (cuda) {
      auto c = cuda_rows(pairs, smoke ? 0.2 : 5.0);
      base = c.front();
      rows.insert(rows.end(), c.begin(), c.end());
    } else {
      base = baseline_host(pairs);
      rows.push_back(base);
      rows.push_back(row{"raw cudaMallocManaged / CUDA managed mempool", 1, 0, 0, 0,
                         "skipped: the backend is " + std::string(uma::to_string(kind)) +
                             (uma::bench::cuda::compiled() ? "" : " (built without CUDA)")});
    }
    std::printf("64 KiB allocate+release, backend %s, %d pairs per thread; baseline: %s\n",
                std::string(uma::to_string(kind)).c_str(), pairs, base.name.c_str());
    std::printf("%-48s %7s %11s %11s %10s %9s  %s\n", "path", "threads", "median ns", "p99 ns",
                "Mpairs/s", "x base", "note");
    bool failed = false;
    for (const auto& r : rows) {
      const double ratio = base.median_ns > 0 && r.median_ns > 0 ? r.median_ns / base.median_ns : 0;
      std::printf("%-48s %7d %11.0f %11.0f %10.3f %9.3f  %s\n", r.name.c_str(), r.threads,
                  r.median_ns, r.p99_ns, r.mpairs_per_s, ratio, r.note.c_str());
      failed = failed || r.note.rfind("FAILED", 0) == 0;
    }
    std::printf("uma_native_bench: done, %s\n", failed ? "FAILURES" : "no failures");
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uma_native_bench: %s\n", e.what());
    return 1;
  }
}
