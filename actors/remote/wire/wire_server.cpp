#include <uma/actors/remote/wire/wire_server.hpp>

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/server_posix.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include <uma/actors/remote/detail/remote_checks.hpp>
#include <uma/actors/remote/wire/detail/arbiter_service.hpp>
#include <uma/actors/remote/wire/detail/connection_guards.hpp>
#include <uma/actors/remote/wire/detail/tls_front.hpp>
#include <uma/actors/remote/wire/detail/unix_listener.hpp>
#include <uma/actors/remote/wire/detail/wire_service.hpp>
#include <uma/actors/remote/wire/detail/wire_tls.hpp>
#include <uma/sys/error.hpp>
#include <uma/sys/log_limiter.hpp>

namespace uma {

namespace {

[[nodiscard]] int ms(std::chrono::milliseconds d) {
  return static_cast<int>(std::min<std::int64_t>(d.count(), INT32_MAX));
}

/// True when `a` and `b` name one file (the same path, however spelled).
[[nodiscard]] bool same_path(const std::string& a, const std::string& b) {
  std::error_code ignored;
  return std::filesystem::weakly_canonical(a, ignored) ==
         std::filesystem::weakly_canonical(b, ignored);
}

/// Refuses a configuration that would serve nothing, or TCP without mutual TLS.
void check(const wire_server_config& c) {
  if (c.socket_path.empty() && c.operator_socket_path.empty() && !c.tcp)
    raise(errc::invalid_argument, "wire server: no listener (a socket path, or TCP with TLS)");
  if (c.tcp && c.tcp_bind.empty())
    raise(errc::invalid_argument,
          "wire server: an empty TCP address would listen on every interface; name one");
  if (!c.socket_path.empty() && same_path(c.socket_path, c.operator_socket_path))
    raise(errc::invalid_argument,
          "wire server: the operator socket must differ from the "
          "tenants' socket (" +
              c.socket_path + ")");
  if (c.socket_mode != 0600 && c.socket_mode != 0660)
    raise(errc::invalid_argument, "wire server: the socket mode must be 0600 or 0660");
  const auto& l = c.limits;
  if (l.max_message_bytes < 1024 || l.max_message_bytes > (64u << 20) ||
      l.memory_bytes < (1u << 20) || l.max_streams_per_connection == 0 || l.max_in_flight == 0 ||
      l.max_in_flight_per_identity == 0 || l.max_region_page == 0 ||
      l.max_connections_per_identity == 0 || l.max_connections_per_address == 0 ||
      l.max_tcp_connections == 0 || l.handshake_timeout.count() <= 0 ||
      l.max_pings_per_second == 0 || l.max_settings_per_second == 0 ||
      l.max_resets_per_second == 0 || l.max_empty_frames_per_second == 0 ||
      l.max_header_block_bytes < 1024 || l.max_new_connections_per_second == 0 ||
      l.bound_penalty.count() < 0)
    raise(errc::invalid_argument, "wire server: a limit is zero or out of range");
  if (l.max_unfinished_bytes_per_connection < l.max_message_bytes + 5 ||
      l.max_unfinished_bytes_per_identity < l.max_unfinished_bytes_per_connection ||
      l.max_unfinished_bytes < l.max_unfinished_bytes_per_identity ||
      l.max_unfinished_bytes > l.memory_bytes / 4)
    raise(errc::invalid_argument,
          "wire server: the unfinished-message bounds must grow from one largest message (per "
          "connection) to per identity to all together, and all together at most a quarter of "
          "the memory budget (" +
              std::to_string(l.memory_bytes) + " bytes)");
}

/// The front's bounds on what a connection sends, from the server's.
[[nodiscard]] detail::frame_limits frame_limits_of(const wire_limits& l) {
  return {.pings_per_second = l.max_pings_per_second,
          .settings_per_second = l.max_settings_per_second,
          .resets_per_second = l.max_resets_per_second,
          .empty_frames_per_second = l.max_empty_frames_per_second,
          .header_block_bytes = l.max_header_block_bytes,
          .streams_with_unfinished = 256,
          .unfinished_per_connection = l.max_unfinished_bytes_per_connection,
          .unfinished_per_identity = l.max_unfinished_bytes_per_identity,
          .unfinished_total = l.max_unfinished_bytes,
          .max_message_bytes = l.max_message_bytes};
}

/// gRPC's own bounds: one byte budget for all connections, message sizes, streams per
/// connection, keepalive and idle limits. (gRPC does no handshake: every connection reaches it
/// as a socket uma accepted, TLS ended by uma's front, which has the handshake deadline.)
void apply_limits(grpc::ServerBuilder& b, grpc::ResourceQuota& quota, const wire_limits& l) {
  quota.Resize(l.memory_bytes);
  b.SetResourceQuota(quota);
  b.SetMaxReceiveMessageSize(static_cast<int>(l.max_message_bytes));
  b.SetMaxSendMessageSize(static_cast<int>(l.max_message_bytes));
  b.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                       static_cast<int>(l.max_streams_per_connection));
  b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, ms(l.idle_timeout));
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ms(l.keepalive_time));
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(l.keepalive_timeout));
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

/// The TLS context of `tls`, every file read and checked now.
[[nodiscard]] std::shared_ptr<SSL_CTX> server_context(const tls_options& tls) {
  return detail::make_server_context(detail::load_pem_credentials(tls), tls);
}

}  // namespace

struct wire_server::impl {
  wire_server_config config;
  detail::peer_table table;
  log_limiter peer_log;  // refusals and closures of connections
  detail::connection_guards guards;
  detail::wire_service service;
  std::unique_ptr<detail::arbiter_service> arbiter;
  grpc::ResourceQuota quota{"uma wire"};
  std::unique_ptr<grpc::Server> server;
  std::atomic<std::uint64_t> refused_connections{0};
  std::vector<std::unique_ptr<detail::unix_listener>> listeners;
  std::unique_ptr<detail::tls_front> tls;

  impl(caf::actor_system& sys, remote_allocator_actor gateway, wire_server_config c)
      : config(std::move(c)),
        peer_log(config.log),
        guards(frame_limits_of(config.limits),
               {config.limits.max_new_connections_per_second, config.limits.bound_penalty}),
        service(sys, std::move(gateway), config, table) {}

  void start(std::shared_ptr<SSL_CTX> tls_context) {
    grpc::ServerBuilder builder;
    apply_limits(builder, quota, config.limits);
    builder.RegisterService(&service);
    if (config.arbiter) {
      arbiter = std::make_unique<detail::arbiter_service>(config.arbiter, table);
      builder.RegisterService(arbiter.get());
    }
    server = builder.BuildAndStart();
    if (!server)
      raise(errc::backend_error, "wire server: gRPC could not start a server");
    if (tls_context)
      listen_tcp(std::move(tls_context));
    listen_unix(config.socket_path, config.socket_mode, false);
    listen_unix(config.operator_socket_path, 0600, true);
  }

  /// TCP through uma's TLS front: the certificate's common name is the identity (control
  /// characters escaped), a name of `operator_names` the operator.
  void listen_tcp(std::shared_ptr<SSL_CTX> ctx) {
    const auto& l = config.limits;
    detail::tls_front::hooks hooks{
        .identify =
            [this](const std::string& cn) {
              const bool op =
                  std::ranges::find(config.operator_names, cn) != config.operator_names.end();
              // Escaped: the name goes into log lines and tables as the tenant.
              return detail::peer_identity{op ? "operator" : "cert " + detail::escape_control(cn),
                                           op};
            },
        .hand_over = [this](int fd) { grpc::AddInsecureChannelFromFd(server.get(), fd); },
        .log = peer_log.as_sink()};
    tls = std::make_unique<detail::tls_front>(
        config.tcp_bind, config.tcp_port, std::move(ctx),
        detail::tls_front_limits{l.max_connections_per_address, l.max_connections_per_identity,
                                 l.max_tcp_connections, l.handshake_timeout},
        table, guards, std::move(hooks), refused_connections);
  }

  void listen_unix(const std::string& path, mode_t mode, bool is_operator) {
    if (path.empty())
      return;
    listeners.push_back(std::make_unique<detail::unix_listener>(
        path, mode, is_operator, config.limits.max_connections_per_identity, table, guards,
        [this](int fd) { grpc::AddInsecureChannelFromFd(server.get(), fd); }, peer_log.as_sink(),
        refused_connections));
  }

  ~impl() {
    listeners.clear();  // no new connections
    tls.reset();
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
  // A limit set through its old name, honoured for one release (sys/renamed_field.hpp).
  if (const auto old = detail::set_through_old_name(config.limits.region_page_size))
    config.limits.max_region_page = *old;
  check(config);
  // Refused before anything binds.
  auto tls_context = config.tcp ? server_context(config.tls) : nullptr;
  impl_ = std::make_unique<impl>(sys, std::move(gateway), std::move(config));
  impl_->start(std::move(tls_context));
}

wire_server::~wire_server() = default;

void wire_server::reload_tls() {
  if (!impl_->tls)
    raise(errc::invalid_argument, "wire server: no TCP listener, so no TLS files to reload");
  impl_->tls->use(server_context(impl_->config.tls));
}

std::uint16_t wire_server::tcp_port() const noexcept {
  return impl_->tls ? impl_->tls->port() : 0;
}

std::uint64_t wire_server::refused_calls() const noexcept {
  return impl_->service.refused();
}

std::uint64_t wire_server::refused_connections() const noexcept {
  return impl_->refused_connections.load();
}

std::vector<std::pair<std::string, std::uint64_t>> wire_server::closed_connections() const {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (std::size_t i = 1; i < detail::guard_reason_count; ++i) {
    const auto r = static_cast<detail::guard_reason>(i);
    out.emplace_back(std::string(to_string(r)), impl_->guards.closed(r));
  }
  return out;
}

std::string wire_server::prometheus_text() const {
  std::string out =
      "# HELP uma_wire_refused_calls_total Calls refused because a bound of the wire was "
      "reached.\n# TYPE uma_wire_refused_calls_total counter\numa_wire_refused_calls_total " +
      std::to_string(refused_calls()) +
      "\n# HELP uma_wire_refused_connections_total Connections refused at accept or handshake "
      "(caps per identity and address).\n# TYPE uma_wire_refused_connections_total "
      "counter\numa_wire_refused_connections_total " +
      std::to_string(refused_connections()) +
      "\n# HELP uma_wire_connections_closed_total Connections closed because they went past a "
      "bound on what they send.\n# TYPE uma_wire_connections_closed_total counter\n";
  for (const auto& [reason, n] : closed_connections())
    out +=
        "uma_wire_connections_closed_total{reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  return out;
}

}  // namespace uma
