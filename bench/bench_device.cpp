// Sections 5 and 7 (CUDA only): redundant SetAccessedBy advice, and kernel read bandwidth on a
// region uma prefetched compared with a cudaMalloc buffer.

#include <algorithm>

#include <uma/actors/client.hpp>
#include "bench/bench_context.hpp"
#include "bench/bench_gpu_util.hpp"

namespace uma::bench {

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t GiB = std::size_t{1} << 30;

}  // namespace

void run_redundant_advice(context& ctx, section& s) {
  const std::size_t bytes = ctx.opt.smoke ? 2 * MiB : 64 * MiB;
  if (!ctx.fits(s, 2 * bytes))
    return;
  const int samples = ctx.opt.samples();
  const int warmup = ctx.opt.warmups();
  // Each raw call costs milliseconds: fewer of them, still a median of many.
  const int raw_samples = std::min(samples, ctx.opt.smoke ? 5 : 200);
  client uma(ctx.sys, ctx.config(allocation_policy::direct));
  uma.set_max_block_bytes(0);  // regions of their own, as measured before the caching layer
  auto ref = uma.allocate<std::byte>(bytes, {.label = "bench advice"});
  raw_buffer raw(raw_buffer::kind::managed, bytes);
  cuda::fill(ref.data(), bytes, 5, ctx.stream);
  cuda::fill(raw.get(), bytes, 6, ctx.stream);
  cuda::synchronize(ctx.stream);

  const double uma_first = wall_ms(
      [&] { static_cast<void>(uma.advise(ref, advice::set_accessed_by, location::device(0))); });
  const double raw_first = wall_ms([&] { cuda::advise_accessed_by(raw.get(), bytes, 0); });
  const auto elided_before = uma.stats().advice_elided;

  advise_request again{{client::erase(ref)}, advice::set_accessed_by, location::device(0)};
  auto chain = run_chain<op_result>(
      ctx.sys, uma.handle(),
      chain_limits{static_cast<std::size_t>(warmup), static_cast<std::size_t>(samples)},
      advise_atom_v, again);
  if (chain->error)
    throw std::runtime_error("advice chain: " + ctx.sys.render(chain->error));
  const auto actor_s = summarize(chain->ns);

  std::vector<double> facade_ns;
  for (int i = 0; i < warmup + samples; ++i) {
    const double ms = wall_ms(
        [&] { static_cast<void>(uma.advise(ref, advice::set_accessed_by, location::device(0))); });
    if (i >= warmup)
      facade_ns.push_back(ms * 1e6);
  }
  const auto facade_s = summarize(facade_ns);
  const auto elided = uma.stats().advice_elided - elided_before;

  std::vector<double> raw_ns;
  for (int i = 0; i < std::min(warmup, 3) + raw_samples; ++i) {
    const double ms = wall_ms([&] { cuda::advise_accessed_by(raw.get(), bytes, 0); });
    if (i >= std::min(warmup, 3))
      raw_ns.push_back(ms * 1e6);
  }
  const auto raw_s = summarize(raw_ns);

  const std::string size = size_text(bytes);
  const figure median{"redundant SetAccessedBy(device 0), " + size + ", actor client, median",
                      actor_s.median / 1e3, "us", "raw cudaMemAdvise (redundant) median",
                      raw_s.median / 1e3};
  s.figures.push_back(median);
  s.figures.push_back({"redundant SetAccessedBy, actor client, p99", actor_s.p99 / 1e3, "us",
                       "raw cudaMemAdvise (redundant) p99", raw_s.p99 / 1e3});
  s.figures.push_back({"redundant SetAccessedBy, blocking facade, median", facade_s.median / 1e3,
                       "us", "raw cudaMemAdvise (redundant) median", raw_s.median / 1e3});
  s.figures.push_back({"first SetAccessedBy through uma (facade, real call)", uma_first * 1e3, "us",
                       "first raw cudaMemAdvise", raw_first * 1e3});
  s.figures.push_back({"redundant requests uma elided", static_cast<double>(elided), "count",
                       "redundant requests sent",
                       static_cast<double>(chain->completed + facade_ns.size() +
                                           static_cast<std::size_t>(warmup))});
  s.notes.push_back("raw: " + std::to_string(raw_s.n) +
                    " redundant calls timed (each costs about a millisecond)");
  ctx.out.add(target{5, "median <= 5 us", median, actor_s.median <= 5e3});
}

void run_kernel_read(context& ctx, section& s) {
  const std::size_t bytes = ctx.opt.smoke ? 64 * MiB : GiB;
  if (!ctx.fits(s, 2 * bytes))
    return;
  const int reps = ctx.opt.smoke ? 3 : 20;
  const int warmup = 2;
  const stream_view stream{ctx.stream};
  client uma(ctx.sys, ctx.config(allocation_policy::direct));
  uma.set_max_block_bytes(0);  // regions of their own, as measured before the caching layer
  auto ref = uma.allocate<std::byte>(bytes, {.label = "bench kernel read"});
  raw_buffer dev(raw_buffer::kind::device, bytes);
  cuda::fill(ref.data(), bytes, 8, ctx.stream);
  cuda::fill(dev.get(), bytes, 9, ctx.stream);
  cuda::synchronize(ctx.stream);
  // The region goes to the host and comes back through uma: a "uma-prefetched" region.
  for (const auto where : {location::host(), location::device(0)})
    if (!uma.prefetch(ref, where, stream, completion::complete).completed)
      throw std::runtime_error("prefetch: the reply did not wait for completion");

  const double uma_first = cuda::read_kernel_ms(ref.data(), bytes, ctx.stream);
  const double dev_first = cuda::read_kernel_ms(dev.get(), bytes, ctx.stream);
  std::vector<double> uma_ms, dev_ms;
  for (int i = 0; i < warmup + reps; ++i) {
    const double u = cuda::read_kernel_ms(ref.data(), bytes, ctx.stream);
    const double d = cuda::read_kernel_ms(dev.get(), bytes, ctx.stream);
    if (i >= warmup) {
      uma_ms.push_back(u);
      dev_ms.push_back(d);
    }
  }
  const std::string size = size_text(bytes);
  const figure median{"kernel read, " + size + " uma-prefetched region (device 0)",
                      gb_per_s(bytes, summarize(uma_ms).median), "GB/s",
                      "the same kernel on a cudaMalloc buffer",
                      gb_per_s(bytes, summarize(dev_ms).median)};
  s.figures.push_back(median);
  s.figures.push_back({"first kernel read right after the uma prefetch", gb_per_s(bytes, uma_first),
                       "GB/s", "first read of the cudaMalloc buffer", gb_per_s(bytes, dev_first)});
  s.notes.push_back("CUDA events around one launch; median of " + std::to_string(reps) +
                    " launches after " + std::to_string(warmup) +
                    " warm-ups (and after the first read, reported separately); launches "
                    "alternate between the two buffers");
  ctx.out.add(target{7, ">= 95% of cudaMalloc", median, median.ratio() >= 0.95});
}

}  // namespace uma::bench
