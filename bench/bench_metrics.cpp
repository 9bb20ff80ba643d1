// uma_metrics_bench: the metrics endpoint under load. 10,000 live regions (8 labels), 8 client
// threads allocating and releasing through the allocator, one scraper doing 1,000 sequential
// GET /metrics over a kept-alive connection. Prints the scrape latency (p50/p99/max) and the
// allocate+release latency of the clients without scraping and with it, in the same run.
//
//   uma_metrics_bench [--backend auto|cuda|host] [--labels] [--smoke]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <caf/actor_system.hpp>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/client.hpp>
#include <uma/actors/metrics/metrics_endpoint.hpp>
#include <uma/messages/register_types.hpp>
#include "bench/bench_report.hpp"
#include "tests/support/http_client.hpp"

namespace {

using namespace uma;
using clock_type = std::chrono::steady_clock;

struct config : caf::actor_system_config {
  config() { register_types(*this); }
};

struct shape {
  std::size_t live_regions = 10'000;
  std::size_t clients = 8;
  std::size_t scrapes = 1'000;
  std::size_t pairs_per_client = 2'000;  ///< the phase without scraping
  bool labels = false;  ///< --labels: the per-label families (one region report per scrape)
  backend_choice backend = backend_choice::automatic;
};

double ns_since(clock_type::time_point start) {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - start).count());
}

/// Each client allocates and drops 256 floats until `stop` is set (or `pairs` are done when
/// `stop` is null); returns every pair's latency in ns.
std::vector<double> allocate_loop(client& uma, std::size_t pairs, const std::atomic<bool>* stop) {
  std::vector<double> samples;
  samples.reserve(pairs);
  for (std::size_t i = 0; stop != nullptr ? !stop->load() : i < pairs; ++i) {
    const auto start = clock_type::now();
    { auto ref = uma.allocate<float>(256, {.label = "bench client"}); }
    samples.push_back(ns_since(start));
  }
  return samples;
}

/// Runs the clients (until `stop` or their pair count) and gathers their samples.
std::vector<double> run_clients(client& uma, const shape& s, const std::atomic<bool>* stop) {
  std::vector<std::vector<double>> per_client(s.clients);
  std::vector<std::thread> threads;
  for (std::size_t c = 0; c < s.clients; ++c)
    threads.emplace_back([&, c] { per_client[c] = allocate_loop(uma, s.pairs_per_client, stop); });
  for (auto& t : threads)
    t.join();
  std::vector<double> all;
  for (auto& v : per_client)
    all.insert(all.end(), v.begin(), v.end());
  return all;
}

/// `scrapes` GET /metrics on one kept-alive connection; each one's latency in ns. Throws when
/// a scrape is not answered 200.
std::vector<double> scrape(std::uint16_t port, std::size_t scrapes, std::size_t& body_bytes) {
  test::http_connection c(port);
  std::vector<double> samples;
  for (std::size_t i = 0; i < scrapes; ++i) {
    const auto start = clock_type::now();
    c.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    const auto r = c.read_response();
    samples.push_back(ns_since(start));
    if (r.status != 200)
      throw std::runtime_error("scrape " + std::to_string(i) + " answered " +
                               std::to_string(r.status) + ": " + r.body);
    body_bytes = r.body.size();
  }
  return samples;
}

void print(const char* what, const bench::summary& s) {
  std::printf("  %-34s n=%-7zu p50 %9.3f ms   p99 %9.3f ms   max %9.3f ms\n", what, s.n,
              s.median / 1e6, s.p99 / 1e6, s.max / 1e6);
}

int run(const shape& s) {
  config cfg;
  caf::actor_system sys{cfg};
  client uma(sys, allocator_config{.backend = {.choice = s.backend},
                                   .memory = {.policy = allocation_policy::pool}});
  uma.set_max_block_bytes(0);  // the allocate latency of the message path
  std::vector<ManagedRef<float>> live;
  live.reserve(s.live_regions);
  for (std::size_t i = 0; i < s.live_regions; ++i)
    live.push_back(uma.allocate<float>(64, {.label = "tenant-" + std::to_string(i % 8)}));
  // A region report every scrape (labels_interval 0): the worst case the table above measured.
  metrics_endpoint endpoint(sys, uma.handle(),
                            {.labels = s.labels, .labels_interval = std::chrono::milliseconds(0)});
  std::printf(
      "uma_metrics_bench: %zu live regions, %zu clients, %zu scrapes, labels %s, "
      "%u hardware threads\n",
      s.live_regions, s.clients, s.scrapes, s.labels ? "on" : "off",
      std::thread::hardware_concurrency());

  const auto quiet = bench::summarize(run_clients(uma, s, nullptr));
  std::atomic<bool> stop{false};
  std::vector<double> scrapes;
  std::size_t body_bytes = 0;
  std::thread scraper([&] {
    scrapes = scrape(endpoint.port(), s.scrapes, body_bytes);
    stop = true;
  });
  const auto busy = bench::summarize(run_clients(uma, s, &stop));
  scraper.join();
  const auto scraped = bench::summarize(scrapes);

  std::printf("scrape body: %zu bytes\n", body_bytes);
  print("scrape latency (GET /metrics)", scraped);
  print("allocate+release, no scraping", quiet);
  print("allocate+release, while scraping", busy);
  std::printf("  ratio (while scraping / without): p50 %.2f, p99 %.2f\n",
              busy.median / quiet.median, busy.p99 / quiet.p99);
  const bool met = scraped.p99 <= 5e6;
  std::printf("target: p99 scrape <= 5 ms: %s (%.3f ms)\n", met ? "met" : "MISSED",
              scraped.p99 / 1e6);
  std::printf("uma_metrics_bench: done\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  shape s;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--smoke") {
      s.live_regions = 200;
      s.scrapes = 50;
      s.pairs_per_client = 50;
    } else if (arg == "--labels") {
      s.labels = true;
    } else if (arg == "--backend" && i + 1 < argc && parse_backend_choice(argv[i + 1])) {
      s.backend = *parse_backend_choice(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: uma_metrics_bench [--backend auto|cuda|host] [--labels] "
                   "[--smoke]\n");
      return 2;
    }
  }
  try {
    return run(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uma_metrics_bench: %s\n", e.what());
    return 1;
  }
}
