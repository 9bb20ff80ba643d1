#include <uma/actors/wire/wire_server.hpp>

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/server_posix.h>

#include <uma/actors/wire/detail/unix_listener.hpp>
#include <uma/actors/wire/detail/wire_service.hpp>
#include <uma/actors/wire/detail/wire_tls.hpp>
#include <uma/sys/error.hpp>

namespace uma {

namespace {

[[nodiscard]] int ms(std::chrono::milliseconds d) {
  return static_cast<int>(std::min<std::int64_t>(d.count(), INT32_MAX));
}

/// Refuses a configuration that would serve nothing, or TCP without mutual TLS.
void check(const wire_server_config& c) {
  if (c.socket_path.empty() && c.operator_socket_path.empty() && !c.tcp)
    raise(errc::invalid_argument, "wire server: no listener (a socket path, or TCP with TLS)");
  if (c.tcp && c.tcp_bind.empty())
    raise(errc::invalid_argument,
          "wire server: an empty TCP address would listen on every interface; name one");
  if (c.socket_mode != 0600 && c.socket_mode != 0660)
    raise(errc::invalid_argument, "wire server: the socket mode must be 0600 or 0660");
  const auto& l = c.limits;
  if (l.max_message_bytes < 1024 || l.max_message_bytes > (64u << 20) ||
      l.memory_bytes < (1u << 20) || l.max_streams_per_connection == 0 || l.max_in_flight == 0 ||
      l.max_in_flight_per_identity == 0 || l.region_page_size == 0 ||
      l.max_connections_per_identity == 0)
    raise(errc::invalid_argument, "wire server: a limit is zero or out of range");
}

/// gRPC's own bounds: one byte budget for all connections, message sizes, streams per
/// connection, handshake deadline, keepalive and idle limits.
void apply_limits(grpc::ServerBuilder& b, grpc::ResourceQuota& quota, const wire_limits& l) {
  quota.Resize(l.memory_bytes);
  b.SetResourceQuota(quota);
  b.SetMaxReceiveMessageSize(static_cast<int>(l.max_message_bytes));
  b.SetMaxSendMessageSize(static_cast<int>(l.max_message_bytes));
  b.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                       static_cast<int>(l.max_streams_per_connection));
  b.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, ms(l.handshake_timeout));
  b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, ms(l.idle_timeout));
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ms(l.keepalive_time));
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(l.keepalive_timeout));
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

[[nodiscard]] std::shared_ptr<grpc::ServerCredentials> mutual_tls(const tls_options& tls) {
  const auto pem = detail::load_pem_credentials(tls);
  grpc::SslServerCredentialsOptions opts(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  opts.pem_root_certs = pem.ca;
  opts.pem_key_cert_pairs.push_back({pem.key, pem.certificate});
  return grpc::SslServerCredentials(opts);
}

}  // namespace

struct wire_server::impl {
  wire_server_config config;
  detail::peer_table table;
  detail::wire_service service;
  grpc::ResourceQuota quota{"uma wire"};
  std::unique_ptr<grpc::Server> server;
  std::atomic<std::uint64_t> refused_connections{0};
  std::vector<std::unique_ptr<detail::unix_listener>> listeners;
  int tcp_port = 0;

  impl(caf::actor_system& sys, remote_allocator_actor gateway, wire_server_config c)
      : config(std::move(c)), service(sys, std::move(gateway), config, table) {}

  void start() {
    grpc::ServerBuilder builder;
    apply_limits(builder, quota, config.limits);
    builder.RegisterService(&service);
    if (config.tcp)
      builder.AddListeningPort(config.tcp_bind + ":" + std::to_string(config.tcp_port),
                               mutual_tls(config.tls), &tcp_port);
    server = builder.BuildAndStart();
    if (!server || (config.tcp && tcp_port == 0))
      raise(errc::backend_error, "cannot listen on " + config.tcp_bind + ":" +
                                     std::to_string(config.tcp_port) +
                                     " (in use, or not an address of this host)");
    listen_unix(config.socket_path, config.socket_mode, false);
    listen_unix(config.operator_socket_path, 0600, true);
  }

  void listen_unix(const std::string& path, mode_t mode, bool is_operator) {
    if (path.empty())
      return;
    listeners.push_back(std::make_unique<detail::unix_listener>(
        path, mode, is_operator, config.limits.max_connections_per_identity, table,
        [this](int fd) { grpc::AddInsecureChannelFromFd(server.get(), fd); }, config.log,
        refused_connections));
  }

  ~impl() {
    listeners.clear();  // no new connections
    if (server) {
      // Cancels the calls still open (the session streams: their sessions end) and waits for
      // the handlers; replies the gateway still owes come within the call timeout.
      server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
      server->Wait();
    }
  }
};

wire_server::wire_server(caf::actor_system& sys, remote_allocator_actor gateway,
                         wire_server_config config) {
  check(config);
  if (config.tcp)
    static_cast<void>(detail::load_pem_credentials(config.tls));  // refused before anything binds
  impl_ = std::make_unique<impl>(sys, std::move(gateway), std::move(config));
  impl_->start();
}

wire_server::~wire_server() = default;

std::uint16_t wire_server::tcp_port() const noexcept {
  return static_cast<std::uint16_t>(impl_->tcp_port);
}

std::uint64_t wire_server::refused_calls() const noexcept {
  return impl_->service.refused();
}

std::uint64_t wire_server::refused_connections() const noexcept {
  return impl_->refused_connections.load();
}

}  // namespace uma
