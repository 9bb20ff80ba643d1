// How a client of the serving node reaches it (actors/remote/detail/remote_channel.hpp).

#include <uma/actors/remote/detail/remote_channel.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include <uma/actors/remote/wire/detail/wire_tls.hpp>
#include <uma/sys/error.hpp>

namespace uma::detail {

void connect_failed(const std::string& address, const std::string& why) {
  raise(errc::backend_error, "cannot reach the uma server at " + address + ": " + why);
}

void throw_status(const grpc::ClientContext& ctx, const grpc::Status& s, const std::string& address,
                  std::chrono::milliseconds timeout) {
  const auto& trailers = ctx.GetServerTrailingMetadata();
  if (auto it = trailers.find("uma-errc"); it != trailers.end()) {
    int code = 0;
    const auto text = it->second;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), code);
    if (ec == std::errc{} && end == text.data() + text.size() && code >= 1 &&
        code < static_cast<int>(errc_slots))
      throw error(static_cast<errc>(code), s.error_message());
  }
  switch (s.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      raise(errc::timeout, "no reply from the uma server at " + address + " within " +
                               std::to_string(timeout.count()) + " ms");
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::CANCELLED:
      raise(errc::allocator_stopped,
            "the uma server at " + address + " went down (" + s.error_message() + ")");
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      raise(errc::quota_exceeded, "the uma server at " + address + ": " + s.error_message());
    default:
      raise(errc::backend_error, "the uma server at " + address + " failed the call (" +
                                     std::to_string(s.error_code()) + ": " + s.error_message() +
                                     ")");
  }
}

/// True when `address` is a Unix socket a server listens on whose backlog is full (or that takes
/// a connection now): a connection that failed there may be tried again. False for TCP, and when
/// nothing listens there.
namespace {

[[nodiscard]] bool busy_unix_server(const std::string& address) {
  if (!address.starts_with("unix:"))
    return false;
  const auto path = address.substr(5);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path)
    return false;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (probe < 0)
    return false;
  const bool busy = ::connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 ||
                    errno == EAGAIN;
  ::close(probe);
  return busy;
}

}  // namespace

std::shared_ptr<grpc::Channel> open_channel(const std::string& target,
                                            const remote_client_options& o) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  if (target.starts_with("unix:")) {
    // A server whose backlog another uid's connect flood keeps full refuses a connection now
    // and takes the next: try again soon (gRPC's default waits a second first).
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 20);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 20);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
    return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  }
  if (!o.tls.enabled())
    raise(errc::invalid_argument,
          "remote_client: " + target +
              " is a TCP address, which the server serves over mutual TLS only: give "
              "--tls-cert, --tls-key and --tls-ca (or connect to its unix: socket)");
  const auto pem = detail::load_pem_credentials(o.tls);
  if (!o.tls_server_name.empty())
    args.SetSslTargetNameOverride(o.tls_server_name);
  return grpc::CreateCustomChannel(target, grpc::SslCredentials({pem.ca, pem.key, pem.certificate}),
                                   args);
}

void await_ready(grpc::Channel& channel, const std::string& address,
                 std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::system_clock::now() + timeout;
  auto state = channel.GetState(true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_SHUTDOWN ||
        (state == GRPC_CHANNEL_TRANSIENT_FAILURE && !busy_unix_server(address)))
      connect_failed(address,
                     "the connection failed (nothing listens there, it was refused, "
                     "or the TLS handshake failed)");
    if (!channel.WaitForStateChange(state, deadline))
      connect_failed(address, "nothing answered within " + std::to_string(timeout.count()) + " ms");
    state = channel.GetState(true);
  }
}

}  // namespace uma::detail
