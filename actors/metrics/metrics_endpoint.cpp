#include <uma/actors/metrics/metrics_endpoint.hpp>

#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>

#include <uma/actors/metrics/detail/http_session.hpp>
#include <uma/actors/metrics/detail/metrics_source.hpp>
#include <uma/actors/metrics/prometheus_text.hpp>
#include <uma/sys/error.hpp>

namespace uma {

namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using detail::http_reply;
using detail::http_respond;

/// The one endpoint `config` names; throws invalid_argument when it names none.
[[nodiscard]] tcp::endpoint resolve(net::io_context& io, const metrics_endpoint_config& config) {
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(config.address, std::to_string(config.port),
                                        tcp::resolver::numeric_service, ec);
  if (ec || results.empty())
    raise(errc::invalid_argument, "metrics endpoint: cannot use the address '" + config.address +
                                      "': " + (ec ? ec.message() : "it resolves to nothing"));
  return results.begin()->endpoint();
}

void check(const metrics_endpoint_config& config, bool has_target) {
  if (!has_target)
    raise(errc::invalid_argument, "metrics endpoint: the allocator handle is null");
  if (config.address.empty())
    raise(errc::invalid_argument,
          "metrics endpoint: an empty address would listen on every interface; name one");
  if (config.threads == 0 || config.max_connections == 0 || config.max_request_bytes < 256)
    raise(errc::invalid_argument,
          "metrics endpoint: threads and max_connections must be at least 1 and "
          "max_request_bytes at least 256");
}

}  // namespace

struct metrics_endpoint::state {
  state(caf::actor_system& sys, managed_allocator_actor allocator,
        allocator_supervisor_actor supervisor, metrics_endpoint_config cfg)
      : config(std::move(cfg)),
        source(sys, std::move(allocator), std::move(supervisor), config.ask_timeout, config.labels,
               config.labels_interval) {
    if (config.snapshot_json)
      routes.push_back(
          {"/snapshot", [this](http_respond respond) { serve_snapshot(std::move(respond)); }});
  }

  net::io_context io;  // first: destroyed last, after every socket
  net::executor_work_guard<net::io_context::executor_type> work{io.get_executor()};
  tcp::acceptor acceptor{io};
  metrics_endpoint_config config;
  detail::metrics_source source;
  std::shared_ptr<detail::http_gate> gate = std::make_shared<detail::http_gate>();
  // The routes: adding one is one line here.
  std::vector<detail::http_route> routes{
      {"/metrics", [this](http_respond respond) { serve_metrics(std::move(respond)); }},
      {"/healthz", [this](http_respond respond) { serve_health(std::move(respond)); }},
  };
  std::mutex sessions_mutex;
  std::map<detail::http_session*, std::shared_ptr<detail::http_session>> sessions;
  std::vector<std::thread> threads;
  std::uint16_t port = 0;

  void listen();
  void accept();
  void on_accept(tcp::socket socket);
  void serve_metrics(http_respond respond) const;
  void serve_health(http_respond respond) const;
  void serve_snapshot(http_respond respond) const;
  void shut_down() noexcept;
};

void metrics_endpoint::state::listen() {
  const auto where = resolve(io, config);
  boost::system::error_code ec;
  acceptor.open(where.protocol(), ec);
  if (!ec)
    acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec)
    acceptor.bind(where, ec);
  if (!ec)
    acceptor.listen(static_cast<int>(config.max_connections), ec);
  if (ec)
    raise(errc::backend_error, "metrics endpoint: cannot listen on " + config.address + ":" +
                                   std::to_string(config.port) + ": " + ec.message());
  port = acceptor.local_endpoint().port();
  gate->io = &io;
  accept();
  for (std::size_t i = 0; i < config.threads; ++i)
    threads.emplace_back([this] { io.run(); });
}

void metrics_endpoint::state::accept() {
  acceptor.async_accept(net::make_strand(io),
                        [this](boost::system::error_code ec, tcp::socket socket) {
                          if (ec == net::error::operation_aborted || !acceptor.is_open())
                            return;
                          if (!ec)
                            on_accept(std::move(socket));
                          accept();  // a failed accept (out of descriptors) is not the end
                        });
}

void metrics_endpoint::state::on_accept(tcp::socket socket) {
  const detail::http_limits limits{config.max_request_bytes, config.read_timeout,
                                   config.bearer_token};
  const std::lock_guard lock(sessions_mutex);
  if (sessions.size() >= config.max_connections) {
    // Answered and closed at once; held only by its own write until that completes.
    std::make_shared<detail::http_session>(std::move(socket), routes, limits, gate, nullptr)
        ->refuse(503, "too many connections (at most " + std::to_string(config.max_connections) +
                          "); try again later\n");
    return;
  }
  auto session = std::make_shared<detail::http_session>(
      std::move(socket), routes, limits, gate, [this](detail::http_session* s) {
        const std::lock_guard lock(sessions_mutex);
        sessions.erase(s);
      });
  sessions.emplace(session.get(), session);
  session->start();
}

void metrics_endpoint::state::serve_metrics(http_respond respond) const {
  source.fetch([respond = std::move(respond),
                extra = config.extra_families](detail::metrics_source::outcome o) {
    if (o.snapshot)
      respond({.content_type = std::string(prometheus_content_type),
               .body = to_prometheus(*o.snapshot) + (extra ? extra() : std::string{})});
    else
      respond({.status = 503,
               .body = "uma: the allocator's metrics are unavailable: " + o.error + "\n"});
  });
}

void metrics_endpoint::state::serve_health(http_respond respond) const {
  source.probe([respond = std::move(respond)](detail::metrics_source::outcome o) {
    if (o.snapshot)
      respond({.body = "ok\n"});
    else
      respond({.status = 503, .body = "unhealthy: " + o.error + "\n"});
  });
}

void metrics_endpoint::state::serve_snapshot(http_respond respond) const {
  source.snapshot([respond = std::move(respond),
                   render = config.snapshot_json](detail::metrics_source::snapshot_outcome o) {
    if (!o.snapshot) {
      std::string body(o.stopped ? "uma: the allocator is stopped: "
                                 : "uma: the allocator's snapshot is unavailable: ");
      respond({.status = 503, .body = body.append(o.error).append("\n")});
      return;
    }
    try {
      respond({.content_type = "application/json", .body = render(*o.snapshot)});
    } catch (const std::exception& e) {
      respond(
          {.status = 500,
           .body =
               std::string("uma: rendering the snapshot failed: ").append(e.what()).append("\n")});
    }
  });
}

void metrics_endpoint::state::shut_down() noexcept {
  {
    const std::lock_guard lock(gate->mutex);
    gate->io = nullptr;  // replies still on their way from CAF threads are dropped
  }
  work.reset();
  io.stop();
  for (auto& t : threads)
    if (t.joinable())
      t.join();
  boost::system::error_code ignored;
  acceptor.close(ignored);
  const std::lock_guard lock(sessions_mutex);
  sessions.clear();  // their sockets close while the io_context still exists
}

metrics_endpoint::metrics_endpoint(caf::actor_system& sys, managed_allocator_actor allocator,
                                   metrics_endpoint_config config) {
  check(config, static_cast<bool>(allocator));
  state_ = std::make_unique<state>(sys, std::move(allocator), allocator_supervisor_actor{},
                                   std::move(config));
  state_->listen();
}

metrics_endpoint::metrics_endpoint(caf::actor_system& sys, allocator_supervisor_actor supervisor,
                                   metrics_endpoint_config config) {
  check(config, static_cast<bool>(supervisor));
  managed_allocator_actor allocator = supervisor;
  state_ =
      std::make_unique<state>(sys, std::move(allocator), std::move(supervisor), std::move(config));
  state_->listen();
}

metrics_endpoint::~metrics_endpoint() {
  state_->shut_down();
}

std::uint16_t metrics_endpoint::port() const noexcept {
  return state_->port;
}

const std::string& metrics_endpoint::address() const noexcept {
  return state_->config.address;
}

}  // namespace uma
