// Sections 3, 4 and 6 (CUDA only): prefetch bandwidth through uma and raw, many pooled refs
// prefetched in one message, and stats latency while a large prefetch is in flight.

#include <cstring>
#include <thread>

#include <uma/actors/client.hpp>
#include "bench/bench_context.hpp"
#include "bench/bench_gpu_util.hpp"

namespace uma::bench {

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t GiB = std::size_t{1} << 30;

void expect_completed(const op_result& r, const char* what) {
  if (!r.completed)
    throw std::runtime_error(std::string(what) + ": the reply did not wait for completion");
}

}  // namespace

void run_prefetch_bandwidth(context& ctx, section& s) {
  const std::size_t bytes = ctx.opt.smoke ? 64 * MiB : GiB;
  if (!ctx.fits(s, 3 * bytes))  // uma's region, a raw managed buffer, a device buffer
    return;
  const int reps = ctx.opt.smoke ? 2 : 9;
  const stream_view stream{ctx.stream};
  client uma(ctx.sys, ctx.config(allocation_policy::direct));
  auto ref = uma.allocate<std::byte>(bytes, {.label = "bench prefetch"});
  raw_buffer raw(raw_buffer::kind::managed, bytes);
  raw_buffer dev(raw_buffer::kind::device, bytes);
  raw_buffer pinned(raw_buffer::kind::pinned, bytes);
  cuda::fill(ref.data(), bytes, 1, ctx.stream);
  cuda::fill(raw.get(), bytes, 2, ctx.stream);
  cuda::fill(dev.get(), bytes, 3, ctx.stream);
  std::memset(pinned.get(), 0x5a, bytes);
  cuda::synchronize(ctx.stream);

  std::vector<double> uma_h2d, uma_d2h, raw_h2d, raw_d2h, copy_h2d, copy_d2h, same_h2d, same_d2h;
  // completion mechanisms without uma, factor by factor: {new thread?, host callback?} x {h2d,
  // d2h}.
  struct mechanism {
    bool thread;
    bool callback;
    const char* name;
    std::vector<double> h2d{}, d2h{};
  };
  std::vector<mechanism> mechanisms{
      {false, true, "raw, host-callback completion"},
      {true, false, "raw, issued from a second thread"},
      {true, true, "raw, second thread + host callback (uma's completion before lanes)"}};
  const auto keep = [](std::vector<double>& v, int rep, double ms) {
    if (rep > 0)  // round 0 warms up
      v.push_back(ms);
  };
  for (int rep = 0; rep <= reps; ++rep) {
    // Both managed buffers start on the device (filled there); alternate who goes first.
    const auto uma_to = [&](location where, std::vector<double>& v) {
      keep(v, rep, wall_ms([&] {
             expect_completed(uma.prefetch(ref, where, stream, completion::complete), "prefetch");
           }));
    };
    const auto raw_to = [&](int where, std::vector<double>& v) {
      keep(v, rep, wall_ms([&] {
             cuda::prefetch(raw.get(), bytes, where, ctx.stream);
             cuda::synchronize(ctx.stream);
           }));
    };
    if (rep % 2 == 0) {
      uma_to(location::host(), uma_d2h);
      raw_to(cuda::host_location, raw_d2h);
      uma_to(location::device(0), uma_h2d);
      raw_to(0, raw_h2d);
    } else {
      raw_to(cuda::host_location, raw_d2h);
      uma_to(location::host(), uma_d2h);
      raw_to(0, raw_h2d);
      uma_to(location::device(0), uma_h2d);
    }
    // The raw call on uma's own region: tells uma's path apart from the buffer it moves.
    for (const int where : {cuda::host_location, 0})
      keep(where == 0 ? same_h2d : same_d2h, rep, wall_ms([&] {
             cuda::prefetch(ref.data(), bytes, where, ctx.stream);
             cuda::synchronize(ctx.stream);
           }));
    for (auto& m : mechanisms)
      for (const int where : {cuda::host_location, 0})
        keep(where == 0 ? m.h2d : m.d2h, rep, wall_ms([&] {
               cuda::prefetch_and_wait(raw.get(), bytes, where, ctx.stream, m.thread, m.callback);
             }));
    keep(copy_h2d, rep, wall_ms([&] {
           cuda::copy(dev.get(), pinned.get(), bytes, ctx.stream);
           cuda::synchronize(ctx.stream);
         }));
    keep(copy_d2h, rep, wall_ms([&] {
           cuda::copy(pinned.get(), dev.get(), bytes, ctx.stream);
           cuda::synchronize(ctx.stream);
         }));
  }
  const auto bw = [&](std::vector<double> v) { return gb_per_s(bytes, summarize(v).median); };
  const std::string size = size_text(bytes);
  const figure h2d{"uma prefetch " + size + " host -> device 0", bw(uma_h2d), "GB/s",
                   "raw cudaMemPrefetchAsync host -> device", bw(raw_h2d)};
  const figure d2h{"uma prefetch " + size + " device 0 -> host", bw(uma_d2h), "GB/s",
                   "raw cudaMemPrefetchAsync device -> host", bw(raw_d2h)};
  s.figures.push_back(h2d);
  s.figures.push_back(d2h);
  s.figures.push_back({"raw cudaMemPrefetchAsync on uma's region, host -> device", bw(same_h2d),
                       "GB/s", "raw cudaMemPrefetchAsync host -> device", bw(raw_h2d)});
  s.figures.push_back({"raw cudaMemPrefetchAsync on uma's region, device -> host", bw(same_d2h),
                       "GB/s", "raw cudaMemPrefetchAsync device -> host", bw(raw_d2h)});
  for (const auto& m : mechanisms) {
    s.figures.push_back({std::string(m.name) + ", host -> device", bw(m.h2d), "GB/s",
                         "raw cudaMemPrefetchAsync host -> device", bw(raw_h2d)});
    s.figures.push_back({std::string(m.name) + ", device -> host", bw(m.d2h), "GB/s",
                         "raw cudaMemPrefetchAsync device -> host", bw(raw_d2h)});
  }
  s.figures.push_back({"raw cudaMemPrefetchAsync " + size + " host -> device", bw(raw_h2d), "GB/s",
                       "pinned cudaMemcpy host -> device", bw(copy_h2d)});
  s.figures.push_back({"raw cudaMemPrefetchAsync " + size + " device -> host", bw(raw_d2h), "GB/s",
                       "pinned cudaMemcpy device -> host", bw(copy_d2h)});
  s.notes.push_back("median of " + std::to_string(reps) +
                    " rounds after a warm-up round; wall clock from the request to its "
                    "completion (uma: completion::complete reply; raw: stream synchronized "
                    "by the calling thread unless the figure says otherwise); "
                    "uma and raw alternate who goes first; buffers filled with a non-zero "
                    "pattern on the device");
  ctx.out.add(target{3, ">= 97% of raw", h2d, h2d.ratio() >= 0.97});
  ctx.out.add(target{3, ">= 97% of raw", d2h, d2h.ratio() >= 0.97});
}

void run_pooled_prefetch(context& ctx, section& s) {
  const std::size_t count = ctx.opt.smoke ? 64 : 1024;
  const std::size_t block = 64 * 1024;
  if (!ctx.fits(s, 2 * count * block + 64 * MiB))
    return;
  const int reps = ctx.opt.smoke ? 2 : 7;
  const stream_view stream{ctx.stream};
  // Every block from one slab of the block allocator: the refs are one span, as they were in
  // the old pool's 64 MiB slab.
  auto cfg = ctx.config(allocation_policy::pool);
  cfg.memory.slab_bytes = count * block;
  client uma(ctx.sys, cfg);
  allocate_request req;
  req.count = block;
  std::vector<byte_ref> refs;
  if (auto err = allocate_many(ctx.sys, uma.handle(), req, count, refs))
    throw std::runtime_error("allocating the pooled refs: " + ctx.sys.render(err));
  std::vector<raw_buffer> raw;
  raw.reserve(count);
  std::vector<void*> raw_ptrs, uma_ptrs;
  const std::vector<std::size_t> sizes(count, block);
  for (std::size_t i = 0; i < count; ++i) {
    raw.emplace_back(raw_buffer::kind::managed, block);
    raw_ptrs.push_back(raw.back().get());
    uma_ptrs.push_back(refs[i].data());
    cuda::fill(raw_ptrs.back(), block, static_cast<std::uint32_t>(i), ctx.stream);
    cuda::fill(uma_ptrs.back(), block, static_cast<std::uint32_t>(i), ctx.stream);
  }
  cuda::synchronize(ctx.stream);
  // Whether the pool policy's blocks are one contiguous span (what uma's coalescing turns into one
  // range); then a single raw call over that span is the floor.
  auto lowest = *std::min_element(uma_ptrs.begin(), uma_ptrs.end());
  bool contiguous = true;
  {
    auto sorted = uma_ptrs;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 1; i < count; ++i)
      contiguous = contiguous && static_cast<std::byte*>(sorted[i]) ==
                                     static_cast<std::byte*>(sorted[i - 1]) + block;
  }
  const auto to_host = [&](const std::vector<void*>& ptrs) {
    for (auto* p : ptrs)
      cuda::prefetch(p, block, cuda::host_location, ctx.stream);
    cuda::synchronize(ctx.stream);
  };

  std::vector<double> one_message, per_ref, raw_loop, raw_batch, raw_batch_pooled, raw_span;
  std::uint64_t backend_ranges = 0;
  for (int rep = 0; rep <= reps; ++rep) {
    const auto keep = [rep](std::vector<double>& v, double ms) {
      if (rep > 0)
        v.push_back(ms);
    };
    to_host(uma_ptrs);
    keep(one_message, wall_ms([&] {
           const auto r = uma.prefetch(refs, {location::device(0)}, stream, completion::complete);
           expect_completed(r, "prefetch");
           backend_ranges = r.backend_ranges;
         }));
    to_host(uma_ptrs);
    std::vector<std::tuple<prefetch_atom, prefetch_request>> each;
    each.reserve(count);
    for (const auto& r : refs)
      each.emplace_back(prefetch_atom_v,
                        prefetch_request{{r}, {location::device(0)}, stream, completion::complete});
    keep(per_ref, wall_ms([&] {
           const auto b = run_burst<op_result>(ctx.sys, uma.handle(), std::move(each));
           if (b.error || b.replies != count)
             throw std::runtime_error("one message per ref: " + ctx.sys.render(b.error));
         }));
    to_host(raw_ptrs);
    keep(raw_loop, wall_ms([&] {
           for (auto* p : raw_ptrs)
             cuda::prefetch(p, block, 0, ctx.stream);
           cuda::synchronize(ctx.stream);
         }));
    to_host(raw_ptrs);
    keep(raw_batch, wall_ms([&] {
           cuda::prefetch_batch(raw_ptrs, sizes, 0, ctx.stream);
           cuda::synchronize(ctx.stream);
         }));
    to_host(uma_ptrs);
    keep(raw_batch_pooled, wall_ms([&] {
           cuda::prefetch_batch(uma_ptrs, sizes, 0, ctx.stream);
           cuda::synchronize(ctx.stream);
         }));
    if (contiguous) {
      to_host(uma_ptrs);
      keep(raw_span, wall_ms([&] {
             cuda::prefetch(lowest, count * block, 0, ctx.stream);
             cuda::synchronize(ctx.stream);
           }));
    }
  }
  const auto ms = [](std::vector<double> v) { return summarize(std::move(v)).median; };
  const std::string n = std::to_string(count) + " x 64 KiB";
  const std::string base = "raw cudaMemPrefetchBatchAsync, " + std::to_string(count) + " buffers";
  const double batch = ms(raw_batch);
  const figure one{"uma, " + n + " pooled refs, one message",
                   ms(one_message),
                   "ms",
                   base,
                   batch,
                   "uma passed " + std::to_string(backend_ranges) + " range(s) to the runtime"};
  s.figures.push_back(one);
  s.figures.push_back(
      {"uma, " + n + " pooled refs, one message each", ms(per_ref), "ms", base, batch});
  s.figures.push_back(
      {"raw cudaMemPrefetchAsync loop, " + n + " buffers", ms(raw_loop), "ms", base, batch});
  s.figures.push_back({"raw batch API over uma's " + n + " pooled blocks", ms(raw_batch_pooled),
                       "ms", base, batch});
  if (contiguous)
    s.figures.push_back(
        {"raw single cudaMemPrefetchAsync over the same " + size_text(count * block) + " span",
         ms(raw_span), "ms", base, batch});
  s.notes.push_back(
      "host -> device 0, completion awaited (uma: completion::complete; raw: "
      "stream synchronized); everything is moved back to the host, untimed, "
      "before each measurement; median of " +
      std::to_string(reps) + " rounds after a warm-up round");
  ctx.out.add(target{4, "<= 3 ms", one, one.value <= 3.0});
}

void run_stats_under_load(context& ctx, section& s) {
  const std::size_t bytes = ctx.opt.smoke ? 256 * MiB : 4 * GiB;
  if (!ctx.fits(s, bytes + 64 * MiB))
    return;
  const int reps = ctx.opt.smoke ? 1 : 3;
  const stream_view stream{ctx.stream};
  client uma(ctx.sys, ctx.config(allocation_policy::direct));
  auto ref = uma.allocate<std::byte>(bytes, {.label = "bench stats under load"});
  cuda::fill(ref.data(), bytes, 7, ctx.stream);
  cuda::synchronize(ctx.stream);

  auto idle = run_chain<allocator_stats>(ctx.sys, uma.handle(),
                                         chain_limits{static_cast<std::size_t>(ctx.opt.warmups()),
                                                      static_cast<std::size_t>(ctx.opt.samples())},
                                         stats_atom_v);
  if (idle->error)
    throw std::runtime_error("stats chain: " + ctx.sys.render(idle->error));
  const auto idle_s = summarize(idle->ns);

  // Other backend work while the big prefetch holds its lane: advice (general lane) and a small
  // prefetch to host (host lane), from a plain thread through the facade.
  auto small = uma.allocate<std::byte>(64 * MiB / 1024, {.label = "bench small"});
  struct stream_owner {
    void* s = cuda::create_stream();
    ~stream_owner() { cuda::destroy_stream(s); }
  } side_stream;
  const auto side_ops = [&](std::vector<double>& advise_ns, std::vector<double>& host_ns) {
    const auto t0 = bench_clock::now();
    (void)uma.advise(small, advice::set_read_mostly);
    const auto t1 = bench_clock::now();
    (void)uma.prefetch(small, location::host(), stream_view{side_stream.s}, completion::complete);
    const auto t2 = bench_clock::now();
    advise_ns.push_back(ns_between(t0, t1));
    host_ns.push_back(ns_between(t1, t2));
    (void)uma.advise(small, advice::unset_read_mostly);  // not elided next time
  };
  std::vector<double> idle_advise, idle_host;
  for (int i = 0; i < 20; ++i)  // warm-up: the lanes' threads start, the pages settle
    side_ops(idle_advise, idle_host);
  idle_advise.clear();
  idle_host.clear();
  for (int i = 0; i < 100; ++i)
    side_ops(idle_advise, idle_host);
  std::vector<double> busy_advise, busy_host;

  std::vector<double> loaded, prefetch_ms;
  for (int rep = 0; rep < reps; ++rep) {
    expect_completed(uma.prefetch(ref, location::host(), stream, completion::complete),
                     "prefetch to host");
    std::atomic<bool> stop{false};
    auto res = std::make_shared<chain_result>();
    chain_limits lim;
    lim.stop = &stop;
    lim.record_sent = true;
    std::vector<caf::actor> hammer{
        spawn_chain<allocator_stats>(ctx.sys, uma.handle(), lim, res, stats_atom_v)};
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the chain is running
    std::atomic<bool> started{false}, finished{false};
    std::thread side([&] {
      while (!started.load())
        std::this_thread::yield();
      std::vector<double> a, h;
      // Only whole rounds inside the prefetch's window count.
      while (!finished.load()) {
        side_ops(a, h);
        if (!finished.load()) {
          busy_advise.push_back(a.back());
          busy_host.push_back(h.back());
        }
      }
    });
    const auto p0 = bench_clock::now();
    started = true;
    expect_completed(uma.prefetch(ref, location::device(0), stream, completion::complete),
                     "prefetch to device");
    const auto p1 = bench_clock::now();
    finished = true;
    side.join();
    stop = true;
    wait_all(ctx.sys, hammer);
    if (res->error)
      throw std::runtime_error("stats chain: " + ctx.sys.render(res->error));
    prefetch_ms.push_back(ns_between(p0, p1) / 1e6);
    for (std::size_t i = 0; i < res->ns.size(); ++i)
      if (res->sent[i] >= p0 &&
          res->sent[i] + std::chrono::nanoseconds(static_cast<std::int64_t>(res->ns[i])) <= p1)
        loaded.push_back(res->ns[i]);
  }
  const auto load_s = summarize(loaded);
  const std::string what = "during a " + size_text(bytes) + " prefetch";
  s.figures.push_back(
      {"stats p50 " + what, load_s.median / 1e3, "us", "stats p50, idle", idle_s.median / 1e3});
  const figure p99{"stats p99 " + what, load_s.p99 / 1e3, "us", "stats p99, idle",
                   idle_s.p99 / 1e3};
  s.figures.push_back(p99);
  s.figures.push_back(
      {"stats max " + what, load_s.max / 1e3, "us", "stats max, idle", idle_s.max / 1e3});
  s.figures.push_back({"stats requests answered " + what, static_cast<double>(load_s.n), "count",
                       "stats requests, idle run", static_cast<double>(idle_s.n)});
  const auto ia = summarize(idle_advise), ih = summarize(idle_host);
  const auto ba = summarize(busy_advise), bh = summarize(busy_host);
  s.figures.push_back({"advise (general lane) median " + what, ba.median / 1e3, "us",
                       "advise median, idle", ia.median / 1e3,
                       std::to_string(ba.n) + " answered inside the window"});
  s.figures.push_back(
      {"advise (general lane) max " + what, ba.max / 1e3, "us", "advise max, idle", ia.max / 1e3});
  s.figures.push_back({"64 KiB prefetch to host (host lane) median " + what, bh.median / 1e3, "us",
                       "the same, idle", ih.median / 1e3,
                       std::to_string(bh.n) + " answered inside the window"});
  const double pf = summarize(prefetch_ms).median;
  s.figures.push_back(
      {"the prefetch itself (" + size_text(bytes) + " host -> device 0)", gb_per_s(bytes, pf),
       "GB/s", "", NAN,
       "median " + number_text(pf) + " ms over " + std::to_string(reps) + " rounds"});
  s.notes.push_back(
      "an actor client sends stats requests back to back while the facade waits "
      "for a completion::complete prefetch; only requests sent and answered "
      "inside the prefetch's window count");
  s.notes.push_back(
      "advise and the small prefetch run on other worker lanes than the big prefetch "
      "(sys/worker_lanes.hpp); with one worker they would wait for the whole transfer");
  ctx.out.add(target{6, "p99 <= 100 us", p99, load_s.n > 0 && load_s.p99 <= 100e3});
}

}  // namespace uma::bench
