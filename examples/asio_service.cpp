// A Boost.Asio TCP service backed by the allocator, and a client that drives it.
//
// Protocol, one line each way: "reduce N\n" -> "sum S\n" (or "error <text>\n"). For each request
// the server allocates a managed scratch buffer of N floats through the uma::asio bridge, fills
// element i with i % 8, prefetches it to the host, sums it with a host loop, replies, and drops
// the buffer. The client opens --connections connections to 127.0.0.1 (ephemeral port), sends
// --requests requests spread over them, checks every answer, and prints latency percentiles and
// the allocator's final stats. Exit status 0 only when every answer was right and no region is
// left live; only then does the "p99" line appear.

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/asio_bridge.hpp>
#include <uma/messages/register_types.hpp>

namespace {

namespace net = boost::asio;
using net::awaitable;
using net::use_awaitable;
using net::ip::tcp;
using strand_type = net::strand<net::io_context::executor_type>;

struct options {
  std::size_t connections = 4;
  std::size_t requests = 200;
  std::size_t floats = 4096;
  std::size_t threads = 2;
  uma::backend_choice backend = uma::backend_choice::automatic;
};

/// What one client connection saw.
struct client_result {
  std::vector<double> latencies_us;
  std::size_t verified = 0;
  std::string first_error;
};

constexpr std::size_t max_floats = std::size_t{1} << 24;

bool parse_count(std::string_view text, std::size_t& out) {
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc{} && ptr == end;
}

bool parse_options(int argc, char** argv, options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (i + 1 >= argc)
      return false;
    const std::string_view value = argv[++i];
    if (flag == "--connections") {
      if (!parse_count(value, o.connections) || o.connections == 0)
        return false;
    } else if (flag == "--requests") {
      if (!parse_count(value, o.requests))
        return false;
    } else if (flag == "--floats") {
      if (!parse_count(value, o.floats) || o.floats == 0 || o.floats + 8 > max_floats)
        return false;
    } else if (flag == "--threads") {
      if (!parse_count(value, o.threads) || o.threads == 0)
        return false;
    } else if (flag == "--backend") {
      const auto choice = uma::parse_backend_choice(value);
      if (!choice)
        return false;
      o.backend = *choice;
    } else {
      return false;
    }
  }
  return true;
}

/// The sum of n elements holding i % 8: what every "reduce n" must answer.
long long expected_sum(std::size_t n) {
  const auto rest = static_cast<long long>(n % 8);
  return static_cast<long long>(n / 8) * 28 + rest * (rest - 1) / 2;
}

/// Answers one request line.
awaitable<std::string> answer(const uma::asio::bridge& bridge, std::string_view line) {
  std::size_t n = 0;
  if (!line.starts_with("reduce ") || !parse_count(line.substr(7), n))
    co_return "error expected 'reduce N'\n";
  if (n > max_floats)
    co_return "error at most " + std::to_string(max_floats) + " floats\n";

  // Named rather than temporaries inside co_await: see async_allocate's note on g++ 12.
  const uma::allocate_options scratch_options{.label = "scratch"};
  uma::asio::error_detail detail;
  auto token = uma::asio::with_detail(net::as_tuple(use_awaitable), detail);
  auto [ec, scratch] = co_await uma::asio::async_allocate<float>(bridge, n, scratch_options, token);
  if (ec)
    co_return "error " + detail.message + "\n";  // e.g. n == 0: invalid_argument
  {
    auto pin = scratch.pin();
    for (std::size_t i = 0; i < pin.size(); ++i)
      pin[i] = static_cast<float>(i % 8);
  }
  co_await uma::asio::async_prefetch(bridge, scratch, uma::location::host(), use_awaitable);
  double sum = 0;
  for (const float x : scratch.pin())
    sum += x;
  co_return "sum " + std::to_string(std::llround(sum)) + "\n";
  // `scratch` drops here, before the reply is written: its region goes back to the allocator.
}

awaitable<void> serve(tcp::socket socket, uma::asio::bridge bridge) {
  std::string buffer;
  for (;;) {
    auto [ec, length] = co_await net::async_read_until(socket, net::dynamic_buffer(buffer), '\n',
                                                       net::as_tuple(use_awaitable));
    if (ec)
      co_return;  // the client closed the connection
    const std::string line = buffer.substr(0, length - 1);
    buffer.erase(0, length);
    const std::string reply = co_await answer(bridge, line);
    co_await net::async_write(socket, net::buffer(reply), use_awaitable);
  }
}

awaitable<void> accept_loop(tcp::acceptor& acceptor, uma::asio::bridge bridge,
                            net::io_context& io) {
  for (;;) {
    auto connection_strand = net::make_strand(io);  // each connection on its own strand
    auto [ec, socket] =
        co_await acceptor.async_accept(connection_strand, net::as_tuple(use_awaitable));
    if (ec)
      co_return;  // closed: the run is over
    auto executor = socket.get_executor();
    net::co_spawn(executor, serve(std::move(socket), bridge), [](std::exception_ptr e) {
      if (!e)
        return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::fprintf(stderr, "asio_service: a server session failed: %s\n", x.what());
      }
    });
  }
}

awaitable<void> run_client(tcp::endpoint server, std::size_t index, std::size_t requests,
                           std::size_t floats, client_result& result) {
  tcp::socket socket(co_await net::this_coro::executor);
  co_await socket.async_connect(server, use_awaitable);
  std::string buffer;
  for (std::size_t i = 0; i < requests; ++i) {
    const std::size_t n = floats + (index * 31 + i) % 8;
    const std::string request = "reduce " + std::to_string(n) + "\n";
    const auto start = std::chrono::steady_clock::now();
    co_await net::async_write(socket, net::buffer(request), use_awaitable);
    const std::size_t length =
        co_await net::async_read_until(socket, net::dynamic_buffer(buffer), '\n', use_awaitable);
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    result.latencies_us.push_back(took.count());
    const std::string reply = buffer.substr(0, length - 1);
    buffer.erase(0, length);
    const std::string expected = "sum " + std::to_string(expected_sum(n));
    if (reply == expected)
      ++result.verified;
    else if (result.first_error.empty())
      result.first_error =
          "reduce " + std::to_string(n) + ": got '" + reply + "', expected '" + expected + "'";
  }
}

/// Runs every client at once, then closes the acceptor and reads the allocator's final stats.
awaitable<void> drive(net::io_context& io, tcp::acceptor& acceptor, const options& o,
                      const uma::asio::bridge& bridge, std::vector<client_result>& results,
                      std::vector<std::exception_ptr>& failures,
                      uma::allocator_stats& final_stats) {
  using client_op = decltype(net::co_spawn(std::declval<strand_type>(),
                                           std::declval<awaitable<void>>(), net::deferred));
  const tcp::endpoint server = acceptor.local_endpoint();
  std::vector<client_op> clients;
  for (std::size_t k = 0; k < o.connections; ++k) {
    const std::size_t share = o.requests / o.connections + (k < o.requests % o.connections);
    clients.push_back(net::co_spawn(
        net::make_strand(io), run_client(server, k, share, o.floats, results[k]), net::deferred));
  }
  auto group = net::experimental::make_parallel_group(std::move(clients));
  auto [order, errors] =
      co_await std::move(group).async_wait(net::experimental::wait_for_all(), use_awaitable);
  failures = std::move(errors);

  net::post(acceptor.get_executor(), [&acceptor] { acceptor.close(); });
  // Every reply was written after its scratch buffer was dropped, so the releases are queued
  // at the allocator before this flush.
  final_stats = co_await uma::asio::async_flush(bridge, use_awaitable);
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty())
    return 0;
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * sorted.size()));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

struct config : caf::actor_system_config {
  config() { uma::register_types(*this); }
};

/// What the clients saw, together: every latency (sorted), answers verified, the first error.
struct summary {
  std::vector<double> latencies;
  std::size_t verified = 0;
  std::string first_error;
};

summary summarize(const std::vector<client_result>& results,
                  const std::vector<std::exception_ptr>& failures,
                  const std::exception_ptr& drive_failure) {
  summary out;
  for (const auto& r : results) {
    out.latencies.insert(out.latencies.end(), r.latencies_us.begin(), r.latencies_us.end());
    out.verified += r.verified;
    if (out.first_error.empty())
      out.first_error = r.first_error;
  }
  for (const auto& e : failures)
    if (e && out.first_error.empty()) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        out.first_error = std::string("a client failed: ") + x.what();
      }
    }
  if (drive_failure && out.first_error.empty())
    out.first_error = "the driver failed";
  std::sort(out.latencies.begin(), out.latencies.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  if (!parse_options(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: asio_service [--connections K] [--requests R] [--floats N] "
                 "[--threads T] [--backend auto|cuda|host]\n");
    return 2;
  }

  // The io_context outlives the actor system: CAF threads post replies into it.
  net::io_context io;
  config cfg;
  caf::actor_system sys{cfg};
  uma::client uma(sys, {.backend = {.choice = o.backend}});
  const uma::asio::bridge bridge(sys, uma.handle(), io);

  auto acceptor_strand = net::make_strand(io);
  tcp::acceptor acceptor(acceptor_strand, tcp::endpoint(net::ip::address_v4::loopback(), 0));
  const auto port = acceptor.local_endpoint().port();
  net::co_spawn(acceptor_strand, accept_loop(acceptor, bridge, io), net::detached);

  std::vector<client_result> results(o.connections);
  std::vector<std::exception_ptr> failures;
  uma::allocator_stats final_stats;
  std::exception_ptr drive_failure;
  net::co_spawn(io, drive(io, acceptor, o, bridge, results, failures, final_stats),
                [&](std::exception_ptr e) { drive_failure = e; });

  std::vector<std::jthread> runners;
  for (std::size_t t = 1; t < o.threads; ++t)
    runners.emplace_back([&io] { io.run(); });
  io.run();
  runners.clear();  // joins

  const auto [latencies, verified, first_error] = summarize(results, failures, drive_failure);

  std::printf("asio_service: backend %s, 127.0.0.1:%u, %zu connections, %zu threads\n",
              final_stats.backend.c_str(), static_cast<unsigned>(port), o.connections, o.threads);
  std::printf("verified %zu/%zu answers\n", verified, o.requests);
  std::printf("allocator: allocations %llu, releases %llu, live_regions %llu, peak_bytes %llu\n",
              static_cast<unsigned long long>(final_stats.allocations),
              static_cast<unsigned long long>(final_stats.releases),
              static_cast<unsigned long long>(final_stats.live_regions),
              static_cast<unsigned long long>(final_stats.peak_bytes));
  if (!first_error.empty() || verified != o.requests || final_stats.live_regions != 0) {
    std::printf("FAILED: %s\n",
                first_error.empty() ? "regions left live or answers missing" : first_error.c_str());
    return 1;
  }
  std::printf("latency us: p50 %.1f  p90 %.1f  p99 %.1f  (max %.1f)\n", percentile(latencies, 50),
              percentile(latencies, 90), percentile(latencies, 99),
              latencies.empty() ? 0.0 : latencies.back());
  return 0;
}
