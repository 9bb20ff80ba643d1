// uma_native_bench --facade: what a blocking facade call costs against what its work costs
// (issue 23, docs/performance.md "The facade's message path"). For 1 and 8 threads: median
// and p99 of each uma::client call that is a message (and of the labelled allocate, a block
// of the block allocator since a label stopped costing a region), the event-based typed
// request (an actor's `request(...).then(...)`, 64 KiB allocate+release) and the backend's
// own call, same run, same actor system (CAF defaults); then the p99 of 8 event-based clients
// at once.

#include "bench/bench_facade.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/client.hpp>
#include <uma/actors/scheduler_tuning.hpp>
#include <uma/messages/register_types.hpp>
#include "bench/bench_actors.hpp"

namespace uma::bench {

namespace {

constexpr std::size_t small = 64 * 1024;
constexpr std::size_t large = 64 * 1024 * 1024;

struct stat_pair {
  double median = 0;
  double p99 = 0;
};

stat_pair stats_of(std::vector<double>& ns) {
  if (ns.empty())
    return {};
  const auto at = [&](double q) {
    const auto k = static_cast<std::size_t>(q * static_cast<double>(ns.size() - 1));
    std::nth_element(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(k), ns.end());
    return ns[k];
  };
  const double median = at(0.5);
  return {median, at(0.99)};
}

/// `op(thread)` `n` times on each of `threads` threads (after n / 10 untimed), every call timed.
std::vector<double> time_threads(int threads, int n, const std::function<void(int)>& op) {
  std::vector<std::vector<double>> per(static_cast<std::size_t>(threads));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < n / 10; ++i)
        op(t);
      ++ready;
      while (!go.load())
        std::this_thread::yield();
      auto& ns = per[static_cast<std::size_t>(t)];
      ns.reserve(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) {
        const auto t0 = bench_clock::now();
        op(t);
        ns.push_back(ns_between(t0, bench_clock::now()));
      }
    });
  while (ready.load() != threads)
    std::this_thread::yield();
  go = true;
  for (auto& th : pool)
    th.join();
  std::vector<double> all;
  for (auto& v : per)
    all.insert(all.end(), v.begin(), v.end());
  return all;
}

/// `op`, a call of `b`'s own, timed as time_threads does. A fresh thread binds the device's
/// context first (backend::prepare_thread): cudaMemRangeGetAttribute fails on a thread that
/// made no other runtime call.
std::vector<double> time_backend(backend& b, int threads, int n,
                                 const std::function<void(int)>& op) {
  return time_threads(threads, n, [&](int t) {
    thread_local const bool prepared = (b.prepare_thread(), true);
    (void)prepared;
    op(t);
  });
}

/// The backend's own `bytes` allocate on `threads` threads, each free handed to one other thread
/// that frees in turn (as the allocator's general lane frees what the actor released): the
/// pattern of the facade's large pair without the actor. At most 16 allocations wait for their
/// free (an allocating thread waits beyond that, inside its timed call).
std::vector<double> frees_on_one_thread(backend& b, int threads, int n, std::size_t bytes) {
  std::mutex m;
  std::deque<void*> queued;
  std::atomic<bool> done{false};
  std::thread freer([&] {
    b.prepare_thread();
    for (;;) {
      void* p = nullptr;
      {
        std::lock_guard lock(m);
        if (!queued.empty()) {
          p = queued.front();
          queued.pop_front();
        }
      }
      if (p != nullptr)
        b.free_managed(p, bytes);
      else if (done.load())
        return;
      else
        std::this_thread::yield();
    }
  });
  auto ns = time_backend(b, threads, n, [&](int) {
    void* p = b.allocate_managed(bytes, attach_flag::global);
    for (;;) {
      std::lock_guard lock(m);
      if (queued.size() < 16) {
        queued.push_back(p);
        return;
      }
    }
  });
  done = true;
  freer.join();
  return ns;
}

/// `threads` event-based clients, each a chain of typed 64 KiB allocate requests (the ref
/// dropped in the handler), one in flight each: every round trip.
std::vector<double> event_based(caf::actor_system& sys, const managed_allocator_actor& target,
                                int threads, int n) {
  chain_limits lim;
  lim.warmup = static_cast<std::size_t>(n / 10);
  lim.samples = static_cast<std::size_t>(n);
  allocate_request r;
  r.count = small;
  r.element_size = 1;
  std::vector<std::shared_ptr<chain_result>> results;
  std::vector<caf::actor> chains;
  for (int t = 0; t < threads; ++t) {
    results.push_back(std::make_shared<chain_result>());
    chains.push_back(spawn_chain<byte_ref>(sys, target, lim, results.back(), allocate_atom_v, r));
  }
  wait_all(sys, chains);
  std::vector<double> all;
  for (auto& res : results) {
    if (res->error)
      throw std::runtime_error("event-based chain failed: " + sys.render(res->error));
    all.insert(all.end(), res->ns.begin(), res->ns.end());
  }
  return all;
}

/// One facade call: its name, what it does on thread t, and the backend's own call (none: 0).
struct facade_call {
  std::string name;
  std::function<void(int)> op;
  std::function<void(int)> backend_op;  ///< on thread t (its own range)
  int divisor = 1;                      ///< fewer samples (the 64 MiB pair)
};

/// `ranges`: 64 KiB of the backend's own per thread (the refs are the allocator's backend's).
std::vector<facade_call> calls(client& c, backend& b, std::vector<ManagedRef<std::byte>>& refs,
                               location where, const std::vector<byte_range>& ranges) {
  allocate_options labelled;
  labelled.label = "bench";
  return {
      {"labelled 64 KiB allocate+release",
       [&c, labelled](int) { (void)c.allocate<std::byte>(small, labelled); },
       [&b](int) { b.free_managed(b.allocate_managed(small, attach_flag::global), small); }},
      {"prefetch 64 KiB (issued)",
       [&c, &refs, where](int t) { (void)c.prefetch(refs[static_cast<std::size_t>(t)], where); },
       [&b, &ranges, where](int t) {
         b.prefetch({&ranges[static_cast<std::size_t>(t)], 1}, {&where, 1}, {});
       }},
      {"advise (redundant)",
       [&c, &refs](int t) {
         (void)c.advise(refs[static_cast<std::size_t>(t)], advice::set_read_mostly);
       },
       [&b, &ranges](int t) {
         b.advise(ranges[static_cast<std::size_t>(t)], advice::set_read_mostly, location::host());
       }},
      {"attributes", [&c, &refs](int t) { (void)c.attributes(refs[static_cast<std::size_t>(t)]); },
       [&b, &ranges](int t) { (void)b.attributes(ranges[static_cast<std::size_t>(t)]); }},
      {"stats", [&c](int) { (void)c.stats(); }, {}},
      // Last: its frees (on the general lane) must not run under the other rows.
      {"64 MiB allocate+release", [&c](int) { (void)c.allocate<std::byte>(large); },
       [&b](int) { b.free_managed(b.allocate_managed(large, attach_flag::global), large); }, 10},
  };
}

/// `backend`: the backend's own call, from as many threads at once (zeros: none).
void print_row(const std::string& name, int threads, stat_pair s, stat_pair event,
               stat_pair backend) {
  const double ratio = event.median > 0 ? s.median / event.median : 0;
  const double above = s.median - backend.median;
  const bool ok = ratio <= 2.0 && above <= 5000 && s.p99 <= 25000;
  std::printf("%-34s %7d %10.0f %10.0f %10.0f %7.2f %10.0f %10.0f %10.0f  %s\n", name.c_str(),
              threads, s.median, s.p99, event.median, ratio, backend.median, backend.p99, above,
              ok ? "ok" : "MISS");
}

}  // namespace

int run_facade_bench(backend_choice choice, int samples, bool tuned) {
  struct config : caf::actor_system_config {
    explicit config(bool tuned) {
      register_types(*this);  // CAF defaults: nothing else set, unless tuned
      if (tuned)
        tune_scheduler(*this);
    }
  } cfg{tuned};
  caf::actor_system sys{cfg};
  allocator_config ac;
  ac.backend.choice = choice;
  // UMA_FACADE_HISTORY=N: the event history's slots (0: none), to see what recording costs.
  if (const char* slots = std::getenv("UMA_FACADE_HISTORY"); slots != nullptr) {
    const std::string_view text(slots);
    const auto [end, ec] =
        std::from_chars(text.data(), text.data() + text.size(), ac.supervision.event_history);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) {
      std::fprintf(stderr, "uma_native_bench: UMA_FACADE_HISTORY='%s' is not a number of slots\n",
                   slots);
      return 2;
    }
  }
  client c(sys, ac);
  auto b = make_backend(choice);
  const location where = b->device_count() > 0 ? location::device(0) : location::host();
  std::vector<ManagedRef<std::byte>> refs;
  for (int t = 0; t < 8; ++t)
    refs.push_back(c.allocate<std::byte>(small));
  std::vector<byte_range> own;
  for (int t = 0; t < 8; ++t)
    own.push_back({b->allocate_managed(small, attach_flag::global), small});
  auto table = calls(c, *b, refs, where, own);
  std::printf("facade calls, backend %s, %d calls per thread, %s (%u hardware threads)\n",
              std::string(to_string(b->kind())).c_str(), samples,
              tuned ? "tuned scheduler" : "CAF defaults", std::thread::hardware_concurrency());
  std::printf("%-34s %7s %10s %10s %10s %7s %10s %10s %10s  %s\n", "call", "threads", "median ns",
              "p99 ns", "event ns", "x event", "backend ns", "backend p99", "above ns", "target");
  for (int threads : {1, 8}) {
    (void)c.flush();
    auto ev = event_based(sys, c.handle(), threads, std::max(100, samples / 2));
    const auto event = stats_of(ev);
    std::printf("%-34s %7d %10.0f %10.0f\n", "event-based typed request", threads, event.median,
                event.p99);
    for (auto& call : table) {
      if (const char* only = std::getenv("UMA_FACADE_ONLY");
          only != nullptr && call.name.find(only) == std::string::npos)
        continue;
      const int n = std::max(100, samples / call.divisor);
      (void)c.flush();  // the previous row's frees have run
      auto ns = time_threads(threads, n, call.op);
      stat_pair backend{};
      if (call.backend_op) {  // the backend's own call, from as many threads at once
        auto own_ns = time_backend(*b, threads, n, call.backend_op);
        backend = stats_of(own_ns);
      }
      print_row(call.name, threads, stats_of(ns), event, backend);
    }
  }
  (void)c.flush();
  auto eight = event_based(sys, c.handle(), 8, std::max(100, samples));
  const auto e8 = stats_of(eight);
  std::printf(
      "8 event-based clients: typed request median %.0f ns, p99 %.0f ns (target 50000): %s\n",
      e8.median, e8.p99, e8.p99 <= 50000 ? "ok" : "MISS");
  // What the direct policy's typed request does on the actor and its lane, without the actor:
  // eight threads each allocating and freeing 64 KiB of the backend's own at once.
  auto raw_ns = time_backend(*b, 8, std::max(100, samples), [&b](int) {
    b->free_managed(b->allocate_managed(small, attach_flag::global), small);
  });
  const auto raw = stats_of(raw_ns);
  std::printf(
      "the backend's own 64 KiB allocate+free, 8 threads at once: median %.0f ns, p99 %.0f "
      "ns\n",
      raw.median, raw.p99);
  for (int threads : {1, 8}) {
    auto queued_ns = frees_on_one_thread(*b, threads, std::max(100, samples / 10), large);
    const auto q = stats_of(queued_ns);
    std::printf(
        "the backend's own 64 MiB allocate, its free on one other thread, %d thread(s): median "
        "%.0f ns, p99 %.0f ns\n",
        threads, q.median, q.p99);
  }
  for (const auto& r : own)
    b->free_managed(r.ptr, r.bytes);
  std::printf("uma_native_bench --facade: done\n");
  return 0;
}

}  // namespace uma::bench
