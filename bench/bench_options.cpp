#include "bench/bench_options.hpp"

#include <charconv>

namespace uma::bench {

namespace {

bool parse_int(const std::string& text, int low, int high, int& out) {
  int value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end || value < low || value > high)
    return false;
  out = value;
  return true;
}

}  // namespace

std::string usage() {
  return "usage: uma_bench [options]\n"
         "  --backend auto|cuda|host  allocator backend (auto: CUDA when a device is usable)\n"
         "  --smoke                   tiny sizes, few iterations (CI: proves it runs; times "
         "nothing)\n"
         "  --only N[,M...]           run only these sections (1-8)\n"
         "  --iterations K            timed samples per latency figure (default 1000, smoke 20)\n"
         "  --warmup W                untimed iterations first (default max(10, K/10))\n"
         "  --duration-ms D           length of one throughput point (default 500, smoke 20)\n"
         "  --json FILE               every figure, target and curve as JSON\n"
         "  --plot-data FILE          latency and throughput curves as a gnuplot table "
         "(bench/plot.gp)\n"
         "experiments (defaults: CAF's scheduler as configured by CAF, allocator on it):\n"
         "  --caf-threads N           scheduler.max-threads\n"
         "  --caf-policy P            scheduler.policy: stealing or sharing\n"
         "  --caf-moderate-sleep-us N work-stealing.moderate-sleep-duration (CAF: 50)\n"
         "  --detached                the allocator on its own thread (allocator_config)\n"
         "  --policy pool|direct      sections 1 and 2: only this allocation policy (profiling)\n"
         "sections: 1 allocate+release latency, 2 throughput vs clients, 3 prefetch 1 GiB,\n"
         "  4 1024 pooled refs prefetched, 5 redundant SetAccessedBy, 6 stats latency during a\n"
         "  4 GiB prefetch, 7 kernel read bandwidth, 8 post_stop with live refs.\n"
         "  On the host backend 3-7 are skipped (they need CUDA).\n"
         "exit status: 0 ok (targets are reported, not enforced), 1 a measurement failed or\n"
         "  something leaked, 2 usage error\n";
}

std::optional<options> parse_options(const std::vector<std::string>& args, std::string& error) {
  options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const auto value = [&]() -> const std::string* {
      if (i + 1 >= args.size()) {
        error = "option '" + a + "' needs a value";
        return nullptr;
      }
      return &args[++i];
    };
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (a == "--smoke") {
      o.smoke = true;
    } else if (a == "--backend") {
      const auto* v = value();
      if (v == nullptr)
        return std::nullopt;
      const auto choice = parse_backend_choice(*v);
      if (!choice) {
        error = "--backend takes auto, cuda or host, not '" + *v + "'";
        return std::nullopt;
      }
      o.backend = *choice;
    } else if (a == "--only") {
      const auto* v = value();
      if (v == nullptr)
        return std::nullopt;
      std::size_t start = 0;
      while (start <= v->size()) {
        const auto comma = std::min(v->find(',', start), v->size());
        int n = 0;
        if (!parse_int(v->substr(start, comma - start), 1, 8, n)) {
          error = "--only takes section numbers 1-8 separated by commas, not '" + *v + "'";
          return std::nullopt;
        }
        o.only.insert(n);
        start = comma + 1;
      }
    } else if (a == "--iterations" || a == "--warmup" || a == "--duration-ms") {
      const auto* v = value();
      if (v == nullptr)
        return std::nullopt;
      int* target = a == "--iterations" ? &o.iterations
                    : a == "--warmup"   ? &o.warmup
                                        : &o.duration_ms;
      if (!parse_int(*v, a == "--warmup" ? 0 : 1, 10'000'000, *target)) {
        error = a + " takes a " + (a == "--warmup" ? "non-negative" : "positive") +
                " integer, not '" + *v + "'";
        return std::nullopt;
      }
    } else if (a == "--detached") {
      o.detached = true;
    } else if (a == "--policy") {
      const auto* v = value();
      if (v == nullptr)
        return std::nullopt;
      if (*v != "pool" && *v != "direct") {
        error = "--policy takes pool or direct, not '" + *v + "'";
        return std::nullopt;
      }
      o.policy = *v;
    } else if (a == "--caf-policy") {
      const auto* v = value();
      if (v == nullptr)
        return std::nullopt;
      if (*v != "stealing" && *v != "sharing") {
        error = "--caf-policy takes stealing or sharing, not '" + *v + "'";
        return std::nullopt;
      }
      o.caf_policy = *v;
    } else if (a == "--caf-threads" || a == "--caf-moderate-sleep-us") {
      const auto* v = value();
      if (v == nullptr)
        return std::nullopt;
      const bool threads = a == "--caf-threads";
      if (!parse_int(*v, threads ? 1 : 0, threads ? 1024 : 1'000'000,
                     threads ? o.caf_threads : o.caf_moderate_sleep_us)) {
        error = a + " takes a " + (threads ? "positive" : "non-negative") + " integer, not '" + *v +
                "'";
        return std::nullopt;
      }
    } else if (a == "--json" || a == "--plot-data") {
      const auto* v = value();
      if (v == nullptr)
        return std::nullopt;
      (a == "--json" ? o.json_path : o.plot_path) = *v;
    } else {
      error = "unknown option '" + a + "'";
      return std::nullopt;
    }
  }
  return o;
}

}  // namespace uma::bench
