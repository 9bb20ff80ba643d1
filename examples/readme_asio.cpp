// The README's Boost.Asio snippet, built and run by the test suite.
#include <algorithm>
#include <cstdio>
#include <exception>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <uma/actors/asio_bridge.hpp>
#include <uma/messages/register_types.hpp>

namespace net = boost::asio;

struct config : caf::actor_system_config {
  config() { uma::register_types(*this); }
};

int main() {
  net::io_context io;  // first: CAF threads post replies into it until the actor system is gone
  config cfg;
  caf::actor_system sys{cfg};
  uma::client uma(sys);  // spawns an allocator (auto backend)
  uma::asio::bridge bridge(sys, uma.handle(), io);

  auto work = [&]() -> net::awaitable<void> {
    auto data = co_await uma::asio::async_allocate<float>(bridge, 1 << 20, net::use_awaitable);
    {
      auto pin = data.pin();
      std::fill(pin.begin(), pin.end(), 1.0f);
    }
    co_await uma::asio::async_prefetch(bridge, data, uma::location::host(), net::use_awaitable);
    double sum = 0;
    for (const float x : data.pin())
      sum += x;
    std::printf("allocated %zu floats, sum %.0f\n", data.size(), sum);

    // Errors are error_codes of the "uma" category; with_detail adds the allocator's text.
    uma::asio::error_detail detail;
    auto [ec, none] = co_await uma::asio::async_allocate<float>(
        bridge, 0, uma::asio::with_detail(net::as_tuple(net::use_awaitable), detail));
    std::printf("zero floats: %s (%s)\n", ec.message().c_str(), detail.message.c_str());
  };
  net::co_spawn(io, work, [](std::exception_ptr e) {
    if (e)
      std::rethrow_exception(e);
  });
  io.run();  // returns once every reply has arrived
}
