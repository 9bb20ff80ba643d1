// Section 8: how long an allocator's stop takes with many live refs, and that it leaks nothing.

#include <algorithm>

#include <caf/scoped_actor.hpp>

#include <uma/actors/client.hpp>
#include <uma/actors/managed_allocator.hpp>
#include "bench/bench_actors.hpp"
#include "bench/bench_context.hpp"

namespace uma::bench {

namespace {

constexpr std::size_t block = 4096;

/// Milliseconds the backend takes to free `count` allocations of `bytes` made just before: what
/// post_stop cannot do faster than (same backend, no actor, no bookkeeping of uma's own).
double backend_free_ms(backend& b, std::size_t count, std::size_t bytes) {
  std::vector<void*> ptrs;
  ptrs.reserve(count);
  try {
    for (std::size_t i = 0; i < count; ++i)
      ptrs.push_back(b.allocate_managed(bytes, attach_flag::global));
  } catch (...) {
    for (auto* p : ptrs)
      b.free_managed(p, bytes);
    throw;
  }
  const auto t0 = bench_clock::now();
  for (auto* p : ptrs)
    b.free_managed(p, bytes);
  return ns_between(t0, bench_clock::now()) / 1e6;
}

struct stop_case {
  allocation_policy policy;
  std::size_t count;
  const char* name;
};

void run_case(context& ctx, section& s, const stop_case& c) {
  const std::string what = std::to_string(c.count) + " live " + c.name;
  const auto before = ctx.backend->counters();
  auto cfg = ctx.config(c.policy);
  const std::size_t slab = cfg.memory.slab_bytes;
  managed_allocator_actor hdl = spawn_allocator(ctx.sys, cfg);

  std::vector<byte_ref> refs;
  allocate_request req;
  req.count = block;
  const auto a0 = bench_clock::now();
  if (auto err = allocate_many(ctx.sys, hdl, req, c.count, refs, 256)) {
    ctx.out.fail(what + ": allocating: " + ctx.sys.render(err));
    caf::scoped_actor self{ctx.sys};
    self->send_exit(hdl, caf::exit_reason::user_shutdown);
    self->wait_for(hdl);
    return;
  }
  const double alloc_ms = ns_between(a0, bench_clock::now()) / 1e6;
  const auto live = client(ctx.sys, hdl).stats();

  const auto t0 = bench_clock::now();
  {
    caf::scoped_actor self{ctx.sys};
    self->send_exit(hdl, caf::exit_reason::user_shutdown);
    self->wait_for(hdl);
  }
  const double wall_ms = ns_between(t0, bench_clock::now()) / 1e6;
  hdl = nullptr;
  const auto info = refs.front().stop_info();
  const auto after_stop = ctx.backend->counters();
  const bool all_inert = std::none_of(refs.begin(), refs.end(), [](auto& r) { return r.valid(); });
  const auto d0 = bench_clock::now();
  refs.clear();
  const double drop_ms = ns_between(d0, bench_clock::now()) / 1e6;
  const auto after_drop = ctx.backend->counters();

  // The same backend allocations uma held (the block allocator's slabs, or one per region),
  // freed raw; post_stop frees those, each a region of its table.
  const bool pooled = c.policy == allocation_policy::pool;
  const std::size_t raw_count = pooled ? live.live_leases : c.count;
  const std::size_t raw_bytes = pooled ? slab : block;
  const double raw_ms = backend_free_ms(*ctx.backend, raw_count, raw_bytes);
  const std::string raw_name = "backend frees of the same " + std::to_string(raw_count) + " " +
                               (pooled ? "slabs" : "regions");

  if (!info) {
    ctx.out.fail(what + ": the refs carry no stop report after the allocator stopped");
    return;
  }
  const double post_stop_ms = static_cast<double>(info->duration.count()) / 1e3;
  s.figures.push_back(
      {"post_stop, " + what + " (stop_info duration)", post_stop_ms, "ms", raw_name, raw_ms});
  s.figures.push_back(
      {"stop, " + what + " (send_exit -> down, wall)", wall_ms, "ms", raw_name, raw_ms});
  s.figures.push_back({"allocating the " + what + " (256 requests in flight)", alloc_ms, "ms", "",
                       NAN,
                       std::to_string(live.live_regions) + " live regions, " +
                           std::to_string(live.live_leases) + " slabs"});
  s.figures.push_back({"dropping the " + what + " after the stop (inert)", drop_ms, "ms", "", NAN});
  const std::uint64_t leaked_allocations = after_stop.live_allocations - before.live_allocations;
  const bool clean = info->regions_freed == raw_count && info->regions_leaked == 0 &&
                     leaked_allocations == 0 && after_stop.bad_frees == before.bad_frees &&
                     after_drop.frees == after_stop.frees &&
                     after_drop.bad_frees == after_stop.bad_frees && all_inert;
  s.figures.push_back({"backend allocations left live after the stop, " + what,
                       static_cast<double>(leaked_allocations), "count",
                       "backend live allocations before", 0.0,
                       "regions freed " + std::to_string(info->regions_freed) + ", leaked " +
                           std::to_string(info->regions_leaked) + ", bad frees " +
                           std::to_string(after_drop.bad_frees - before.bad_frees) +
                           ", refs inert: " + (all_inert ? "yes" : "no")});
  if (!clean)
    ctx.out.fail(what + ": the stop did not free exactly what was allocated (see figures)");
  if (pooled)
    ctx.out.add(target{8, "<= 50 ms",
                       figure{"post_stop with " + what, post_stop_ms, "ms", raw_name, raw_ms},
                       post_stop_ms <= 50});
  ctx.out.add(target{
      8, "nothing leaked",
      figure{"leaked allocations after stop, " + what, static_cast<double>(leaked_allocations),
             "count", "live allocations before", 0.0},
      clean});
}

}  // namespace

void run_stop(context& ctx, section& s) {
  const stop_case pool{allocation_policy::pool, ctx.opt.smoke ? std::size_t{2000} : 100'000,
                       "pooled refs (4 KiB blocks)"};
  const stop_case direct{allocation_policy::direct, ctx.opt.smoke ? std::size_t{500} : 10'000,
                         "direct regions (4 KiB)"};
  // The refs, then the same allocations again for the raw baseline (plus a slab of slack).
  if (!ctx.fits(s, 2 * pool.count * block + (std::size_t{128} << 20)))
    return;
  run_case(ctx, s, pool);
  run_case(ctx, s, direct);
  s.notes.push_back(
      "stop = send_exit(user_shutdown) + wait for the down message; post_stop frees every "
      "region (the pool policy: the block allocator's slabs) and turns all refs inert; leak check "
      "on the backend's "
      "counters (live_allocations, bad_frees)");
}

}  // namespace uma::bench
