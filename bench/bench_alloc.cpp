// Sections 1 and 2: allocate+release latency per block size, and aggregate throughput per
// number of client actors, through the allocator (pool and direct policies) and raw.

#include <algorithm>
#include <map>
#include <sstream>
#include <thread>

#include <caf/scheduler/abstract_coordinator.hpp>
#include <caf/stateful_actor.hpp>

#include <uma/actors/client.hpp>
#include "bench/bench_actors.hpp"
#include "bench/bench_context.hpp"
#include "bench/cuda_ops.hpp"

namespace uma::bench {

namespace {

constexpr const char* pool_actor = "uma pool (actor)";
constexpr const char* direct_actor = "uma direct (actor)";
constexpr const char* pool_facade = "uma pool (facade)";
constexpr const char* direct_facade = "uma direct (facade)";
constexpr const char* backend_call = "backend call (no actor)";
constexpr const char* lease_fast = "uma blocks (fast path)";
constexpr const char* raw_cold = "raw cudaMallocManaged cold";
constexpr const char* raw_warm = "raw cudaMallocManaged warm";
constexpr const char* mempool = "CUDA managed mempool";

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr std::size_t target_bytes = 64 * KiB;

/// What each figure of sections 1 and 2 is compared with: the raw call where CUDA is there,
/// the backend's own call (mmap/munmap) on the host.
const char* baseline_variant(const context& ctx) {
  return ctx.cuda ? raw_warm : backend_call;
}

allocate_request bytes_request(std::size_t bytes) {
  allocate_request r;
  r.count = bytes;
  r.element_size = 1;
  return r;
}

/// The allocator's counters once every release before now was processed; a release still
/// outstanding is a failure of the run (a measured pair that did not really release).
void expect_all_released(context& ctx, client& c, const std::string& what) {
  const auto st = c.flush();
  // The block allocator's slabs (the pool policy's small refs are blocks) stay cached.
  const auto regions = st.live_regions - st.live_leases;
  const auto blocks = c.blocks()->stats().blocks_in_use;
  if (regions != 0 || blocks != 0)
    ctx.out.fail(what + ": " + std::to_string(regions) + " regions and " + std::to_string(blocks) +
                 " blocks still live after flush (releases not processed)");
}

/// Times `pair()` (one allocate+release) `warmup + samples` times, at most `time_limit_s`
/// seconds (at least 10 samples); empty when a pair returns false (a failed run).
template <class Pair>
std::vector<double> timed_pairs(int warmup, int samples, double time_limit_s, Pair pair) {
  std::vector<double> ns;
  ns.reserve(static_cast<std::size_t>(samples));
  const auto start = bench_clock::now();
  for (int i = 0; i < warmup + samples; ++i) {
    const auto t0 = bench_clock::now();
    if (!pair())
      return {};
    if (i >= warmup)
      ns.push_back(ns_between(t0, bench_clock::now()));
    if (i >= warmup + 10 && ns_between(start, bench_clock::now()) > time_limit_s * 1e9)
      break;
  }
  return ns;
}

std::vector<double> backend_pairs(backend& b, std::size_t bytes, int warmup, int samples,
                                  double time_limit_s) {
  return timed_pairs(warmup, samples, time_limit_s, [&] {
    b.free_managed(b.allocate_managed(bytes, attach_flag::global), bytes);
    return true;
  });
}

std::vector<double> facade_pairs(client& c, std::size_t bytes, int warmup, int samples,
                                 double time_limit_s) {
  return timed_pairs(warmup, samples, time_limit_s, [&] {
    auto ref = c.allocate<std::byte>(bytes);
    return true;
  });
}

/// Fast-path pairs: a block from the allocator's block allocator and its drop, on the calling
/// thread.
std::vector<double> lease_pairs(block_allocator& blocks, std::size_t bytes, int warmup, int samples,
                                double time_limit_s) {
  return timed_pairs(warmup, samples, time_limit_s,
                     [&] { return !blocks.allocate(bytes, 0, {}).empty(); });
}

/// A client actor of the fast path: `batch` pairs from the shared block allocator per message
/// to itself, until `stop`; adds its pairs to `pairs` when done.
struct lease_client_state {
  block_allocator_ref blocks;
  std::size_t bytes = 0;
  std::uint64_t done = 0;
};

caf::behavior lease_client(caf::stateful_actor<lease_client_state>* self,
                           block_allocator_ref blocks, std::size_t bytes,
                           const std::atomic<bool>* stop, std::atomic<std::uint64_t>* pairs,
                           std::atomic<std::uint64_t>* misses) {
  self->state.blocks = std::move(blocks);
  self->state.bytes = bytes;
  self->send(self, caf::atom("tick"));
  return {[self, stop, pairs, misses](caf::atom_value) {
    auto& st = self->state;
    for (int i = 0; i < 1000; ++i) {
      try {
        auto ref = st.blocks->allocate(st.bytes, 0, {});
      } catch (const error&) {
        misses->fetch_add(1, std::memory_order_relaxed);
      }
      ++st.done;
    }
    if (stop->load(std::memory_order_relaxed)) {
      pairs->fetch_add(st.done);
      self->quit();
      return;
    }
    self->send(self, caf::atom("tick"));
  }};
}

std::string cell(const summary& s) {
  if (s.n == 0)
    return "-";
  return number_text(s.median / 1e3) + "/" + number_text(s.p99 / 1e3);
}

std::string padded(std::string s, std::size_t w) {
  if (s.size() < w)
    s.append(w - s.size(), ' ');
  return s + " ";
}

/// The size x variant matrix: median/p99 in us, then median ratios to the baseline.
std::string matrix(const std::vector<std::size_t>& sizes, const std::vector<std::string>& variants,
                   std::map<std::string, std::map<std::size_t, summary>>& results,
                   const std::string& baseline) {
  std::ostringstream m;
  std::size_t w = 12;
  for (const auto& v : variants)
    w = std::max(w, v.size() + 1);
  const auto header = [&](const char* what) {
    m << "  " << what << "\n  " << padded("size", 9);
    for (const auto& v : variants)
      m << padded(v, w);
    m << "\n";
  };
  header("median/p99 per allocate+release pair, us");
  for (const auto size : sizes) {
    m << "  " << padded(size_text(size), 9);
    for (const auto& v : variants)
      m << padded(cell(results[v][size]), w);
    m << "\n";
  }
  header(("ratio of medians to the same-run baseline '" + baseline + "'").c_str());
  for (const auto size : sizes) {
    m << "  " << padded(size_text(size), 9);
    const double base = results[baseline][size].median;
    for (const auto& v : variants) {
      const double r = results[v][size].median / base;
      m << padded(std::isfinite(r) ? number_text(r) : std::string("-"), w);
    }
    m << "\n";
  }
  return m.str();
}

}  // namespace

void run_alloc_latency(context& ctx, section& s) {
  const std::vector<std::size_t> sizes =
      ctx.opt.smoke ? std::vector<std::size_t>{256, 64 * KiB, MiB}
                    : std::vector<std::size_t>{256,       KiB, 4 * KiB, 16 * KiB, 64 * KiB,
                                               256 * KiB, MiB, 4 * MiB, 16 * MiB, 64 * MiB};
  // A slab of the block allocator, a warm block, the pair itself and the mempool's cache of the
  // largest size.
  if (!ctx.fits(s, 64 * MiB + 4 * sizes.back()))
    return;
  const int samples = ctx.opt.samples();
  const int warmup = ctx.opt.warmups();
  const double limit = ctx.opt.smoke ? 0.5 : 1.0;  // seconds per measurement, at most
  std::vector<std::string> variants;
  std::map<std::string, std::map<std::size_t, summary>> results;
  std::map<std::string, double> slow_share;  // at 64 KiB: share of pairs over 20 us
  const auto record = [&](const char* variant, std::size_t size, std::vector<double> ns) {
    if (std::find(variants.begin(), variants.end(), variant) == variants.end())
      variants.emplace_back(variant);
    if (size == target_bytes && !ns.empty())
      slow_share[variant] = 100.0 *
                            static_cast<double>(std::count_if(ns.begin(), ns.end(),
                                                              [](double v) { return v > 20e3; })) /
                            static_cast<double>(ns.size());
    auto sm = summarize(std::move(ns));
    results[variant][size] = sm;
    ctx.out.add(latency_point{variant, size, sm});
  };

  // Raw first, while nothing of uma is alive ("cold" means no other managed allocation).
  if (ctx.cuda) {
    for (const auto size : sizes)
      record(raw_cold, size, cuda::malloc_managed_pairs(size, warmup, samples, limit, false));
    for (const auto size : sizes)
      record(raw_warm, size, cuda::malloc_managed_pairs(size, warmup, samples, limit, true));
    auto pool = cuda::create_managed_pool();
    if (pool.handle != nullptr) {
      s.notes.push_back("managed mempool: " + pool.how +
                        "; cudaMallocFromPoolAsync + cudaFreeAsync, no synchronize per pair");
      for (const auto size : sizes)
        record(mempool, size, cuda::mempool_pairs(pool, size, warmup, samples, limit, ctx.stream));
      cuda::destroy_managed_pool(pool);
    } else {
      s.figures.push_back(
          {"CUDA managed mempool, 64 KiB", NAN, "us", "", NAN, "no managed pool: " + pool.error});
    }
  }
  for (const auto size : sizes)
    record(backend_call, size, backend_pairs(*ctx.backend, size, warmup, samples, limit));

  for (const auto policy : {allocation_policy::pool, allocation_policy::direct}) {
    const bool pooled = policy == allocation_policy::pool;
    if (!ctx.opt.measures(pooled ? "pool" : "direct"))
      continue;
    client owner(ctx.sys, ctx.config(policy));
    owner.set_max_block_bytes(
        0);  // these rows measure the message path; uma_native_bench the caching layer
    for (const auto size : sizes) {
      auto chain = run_chain<byte_ref>(
          ctx.sys, owner.handle(),
          chain_limits{static_cast<std::size_t>(warmup), static_cast<std::size_t>(samples), limit},
          allocate_atom_v, bytes_request(size));
      if (chain->error) {
        ctx.out.fail(std::string(pooled ? pool_actor : direct_actor) + " " + size_text(size) +
                     ": " + ctx.sys.render(chain->error));
        return;
      }
      record(pooled ? pool_actor : direct_actor, size, std::move(chain->ns));
      expect_all_released(ctx, owner, pooled ? pool_actor : direct_actor);
      record(pooled ? pool_facade : direct_facade, size,
             facade_pairs(owner, size, warmup, samples, limit));
      expect_all_released(ctx, owner, pooled ? pool_facade : direct_facade);
    }
  }

  if (ctx.opt.measures("pool")) {
    client owner(ctx.sys, ctx.config(allocation_policy::pool));
    owner.set_max_block_bytes(
        0);  // these rows measure the message path; uma_native_bench the caching layer
    const auto blocks = owner.blocks();
    for (const auto size : sizes) {
      if (!blocks->serves(size))
        continue;  // above max_pooled_block: a region of its own (the rows above)
      record(lease_fast, size, lease_pairs(*blocks, size, warmup, samples, limit));
    }
    if (const auto st = blocks->stats(); st.blocks_in_use != 0)
      ctx.out.fail(std::string(lease_fast) + ": " + std::to_string(st.blocks_in_use) +
                   " blocks out after the run");
  }

  const std::string base = baseline_variant(ctx);
  ctx.out.print_block(matrix(sizes, variants, results, base));
  s.notes.push_back(
      "a pair is allocate + drop of the ref; through the actor the release is processed "
      "asynchronously (the next request's round trip includes it); each run ends with a flush "
      "that must show no region but the block allocator's slabs live, and no block out");
  s.notes.push_back(
      "pool: requests up to max_pooled_block (16 MiB) are blocks of the block allocator (taken by "
      "the actor); larger sizes go direct");
  s.notes.push_back("nothing is touched: the pairs measure bookkeeping and mapping, not paging");
  s.notes.push_back(
      "uma blocks (fast path): block_allocator::allocate + drop on the calling thread (no "
      "message; a slab from the resource stack on a miss)");

  const auto& b64 = results[base][target_bytes];
  for (const auto& v : variants) {
    if (v == base)
      continue;  // it is the baseline column of every other row
    const auto& r = results[v][target_bytes];
    s.figures.push_back(
        {v + ", 64 KiB, median", r.median / 1e3, "us", base + " median", b64.median / 1e3});
    s.figures.push_back({v + ", 64 KiB, p99", r.p99 / 1e3, "us", base + " p99", b64.p99 / 1e3});
    s.figures.push_back({v + ", 64 KiB, mean", r.mean / 1e3, "us", base + " mean", b64.mean / 1e3});
    s.figures.push_back({v + ", 64 KiB, pairs over 20 us", slow_share[v], "%",
                         base + ", pairs over 20 us", slow_share[base]});
  }
  if (!ctx.opt.measures("pool"))
    return;
  const auto& t = results[pool_actor][target_bytes];
  ctx.out.add(target{1, "median <= 2 us",
                     figure{"64 KiB allocate+release, pool, actor client", t.median / 1e3, "us",
                            base + " median", b64.median / 1e3},
                     t.median <= 2000});
  const auto& f = results[lease_fast][target_bytes];
  ctx.out.add(target{1, "fast path median <= 0.5 us",
                     figure{"64 KiB allocate+release, blocks (fast path)", f.median / 1e3, "us",
                            base + " median", b64.median / 1e3},
                     f.median <= 500});
  if (ctx.cuda && results.count(mempool) != 0) {
    const auto& m = results[mempool][target_bytes];
    s.figures.push_back({"uma pool (actor) vs CUDA managed mempool, 64 KiB, median", t.median / 1e3,
                         "us", "CUDA managed mempool median", m.median / 1e3});
  }
}

void run_throughput(context& ctx, section& s) {
  const std::vector<int> counts{1, 2, 4, 8, 16};
  if (!ctx.fits(s, 64 * MiB + 2 * 16 * target_bytes + 64 * MiB))
    return;
  const double seconds = ctx.opt.point_seconds();
  std::map<std::string, std::map<int, double>> rate;
  std::vector<std::string> order;
  const auto record = [&](const std::string& variant, int clients, std::uint64_t pairs,
                          double secs) {
    const double r = static_cast<double>(pairs) / secs;
    if (rate.count(variant) == 0)
      order.push_back(variant);
    rate[variant][clients] = r;
    ctx.out.add(throughput_point{variant, clients, r, pairs, secs});
  };

  for (const auto policy : {allocation_policy::pool, allocation_policy::direct}) {
    const bool pooled = policy == allocation_policy::pool;
    if (!ctx.opt.measures(pooled ? "pool" : "direct"))
      continue;
    const std::string variant = pooled ? pool_actor : direct_actor;
    client owner(ctx.sys, ctx.config(policy));
    owner.set_max_block_bytes(
        0);  // these rows measure the message path; uma_native_bench the caching layer
    // Warm-up: the block allocator's first slab, CAF's workers.
    auto warm = run_chain<byte_ref>(ctx.sys, owner.handle(),
                                    chain_limits{0, static_cast<std::size_t>(ctx.opt.warmups())},
                                    allocate_atom_v, bytes_request(target_bytes));
    if (warm->error) {
      ctx.out.fail(variant + " warm-up: " + ctx.sys.render(warm->error));
      return;
    }
    for (const int n : counts) {
      std::atomic<bool> stop{false};
      std::vector<std::shared_ptr<chain_result>> results;
      std::vector<caf::actor> clients;
      chain_limits lim;
      lim.stop = &stop;
      lim.keep_samples = false;
      const auto t0 = bench_clock::now();
      for (int i = 0; i < n; ++i) {
        results.push_back(std::make_shared<chain_result>());
        clients.push_back(spawn_chain<byte_ref>(ctx.sys, owner.handle(), lim, results.back(),
                                                allocate_atom_v, bytes_request(target_bytes)));
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      stop = true;
      wait_all(ctx.sys, clients);
      const auto st = owner.flush();  // the run ends when its releases were processed
      const double secs = ns_between(t0, bench_clock::now()) / 1e9;
      std::uint64_t pairs = 0;
      for (const auto& r : results) {
        pairs += r->completed;
        if (r->error)
          ctx.out.fail(variant + ", " + std::to_string(n) +
                       " clients: " + ctx.sys.render(r->error));
      }
      // The block allocator's slabs (the pool policy's refs are blocks) stay cached.
      if (st.live_regions != st.live_leases)
        ctx.out.fail(variant + ", " + std::to_string(n) +
                     " clients: " + std::to_string(st.live_regions - st.live_leases) +
                     " regions live after flush");
      record(variant, n, pairs, secs);
    }
  }

  if (ctx.opt.measures("pool")) {
    const std::string variant = "uma blocks (fast path, actors)";
    client owner(ctx.sys, ctx.config(allocation_policy::pool));
    owner.set_max_block_bytes(
        0);  // these rows measure the message path; uma_native_bench the caching layer
    for (const int n : counts) {
      std::atomic<bool> stop{false};
      std::atomic<std::uint64_t> pairs{0}, misses{0};
      const auto blocks = owner.blocks();
      std::vector<caf::actor> clients;
      const auto t0 = bench_clock::now();
      for (int i = 0; i < n; ++i)
        clients.push_back(
            ctx.sys.spawn(lease_client, blocks, target_bytes, &stop, &pairs, &misses));
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      stop = true;
      wait_all(ctx.sys, clients);
      const double secs = ns_between(t0, bench_clock::now()) / 1e9;
      if (misses.load() != 0)
        ctx.out.fail(variant + ": " + std::to_string(misses.load()) + " refused blocks");
      record(variant, n, pairs.load(), secs);
    }
    if (const auto st = owner.blocks()->stats(); st.blocks_in_use != 0)
      ctx.out.fail(variant + ": " + std::to_string(st.blocks_in_use) + " blocks out after the run");
  }

  std::string base;
  if (ctx.cuda) {
    base = "raw cudaMallocManaged+cudaFree (threads)";
    for (const int n : counts) {
      const auto r = cuda::malloc_managed_throughput(target_bytes, n, seconds);
      record(base, n, r.pairs, r.seconds);
    }
    auto pool = cuda::create_managed_pool();
    if (pool.handle != nullptr) {
      for (const int n : counts) {
        const auto r = cuda::mempool_throughput(pool, target_bytes, n, seconds);
        record("CUDA managed mempool (threads)", n, r.pairs, r.seconds);
      }
      cuda::destroy_managed_pool(pool);
    } else {
      s.notes.push_back("no managed mempool: " + pool.error);
    }
  } else {
    base = "backend call (threads, no actor)";
    for (const int n : counts) {
      std::atomic<bool> stop{false};
      std::atomic<std::uint64_t> pairs{0};
      std::vector<std::thread> threads;
      const auto t0 = bench_clock::now();
      for (int i = 0; i < n; ++i)
        threads.emplace_back([&] {
          std::uint64_t k = 0;
          while (!stop.load(std::memory_order_relaxed)) {
            void* p = ctx.backend->allocate_managed(target_bytes, attach_flag::global);
            ctx.backend->free_managed(p, target_bytes);
            ++k;
          }
          pairs += k;
        });
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      stop = true;
      for (auto& t : threads)
        t.join();
      record(base, n, pairs.load(), ns_between(t0, bench_clock::now()) / 1e9);
    }
  }

  for (const auto& variant : order) {
    if (variant == base)
      continue;
    for (const auto& [n, r] : rate[variant])
      s.figures.push_back({variant + ", " + std::to_string(n) + " client" + (n > 1 ? "s" : ""), r,
                           "pairs/s", base, rate[base][n]});
  }
  s.notes.push_back(
      "64 KiB pairs; each client actor keeps one request in flight; a point ends "
      "with a flush (releases processed, no region live but the block allocator's slabs) "
      "inside the timed interval");
  s.notes.push_back("CAF scheduler threads: " + std::to_string(ctx.sys.scheduler().num_workers()) +
                    "; hardware threads: " + std::to_string(std::thread::hardware_concurrency()));
  if (!ctx.opt.measures("pool"))
    return;
  ctx.out.add(target{2, ">= 1000000 pairs/s",
                     figure{"allocate+release throughput, pool, 8 client actors",
                            rate[pool_actor][8], "pairs/s", base + ", 8 threads", rate[base][8]},
                     rate[pool_actor][8] >= 1e6});
  const double fast8 = rate["uma blocks (fast path, actors)"][8];
  ctx.out.add(target{2, ">= 1000000 pairs/s (fast path)",
                     figure{"allocate+release throughput, blocks fast path, 8 client actors", fast8,
                            "pairs/s", base + ", 8 threads", rate[base][8]},
                     fast8 >= 1e6});
}

}  // namespace uma::bench
