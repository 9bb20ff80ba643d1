#pragma once

// How a client of the serving node reaches it over gRPC (docs/distributed.md): the channel to a
// unix: or TLS target, the wait for it to connect, and the uma error a failed call stands for.
// Shared by the remote client and the arbiter's member.

#include <chrono>
#include <memory>
#include <string>
#include <type_traits>

#include <grpcpp/grpcpp.h>

#include <uma/actors/remote/remote_client_options.hpp>

namespace uma::detail {

/// The channel to `target` ("unix:PATH", or "HOST:PORT" with `o.tls`): invalid_argument for a
/// TCP target without TLS files, the TLS files' own refusals.
[[nodiscard]] std::shared_ptr<grpc::Channel> open_channel(const std::string& target,
                                                          const remote_client_options& o);
/// Waits (bounded by `timeout`) for `channel` to connect; backend_error at the first failed
/// attempt (nothing listens, the connection is refused, the TLS handshake fails) rather than
/// retrying, except on a Unix socket whose backlog is full.
void await_ready(grpc::Channel& channel, const std::string& address,
                 std::chrono::milliseconds timeout);
/// backend_error "cannot reach the uma server at ADDRESS: WHY".
[[noreturn]] void connect_failed(const std::string& address, const std::string& why);
/// The uma error a failed call stands for: the server's own (its code in the trailing metadata
/// "uma-errc"), or what the transport says about the server (timeout, allocator_stopped,
/// quota_exceeded, backend_error).
[[noreturn]] void throw_status(const grpc::ClientContext& ctx, const grpc::Status& s,
                               const std::string& address, std::chrono::milliseconds timeout);

/// One unary call of `stub` with `timeout`; throws what a failed status stands for
/// (throw_status), or calls `unimplemented` (which throws) when the server has no such service.
template <class Rep, class Stub, class Method, class Req, class Unimplemented = std::nullptr_t>
Rep unary_call(Stub& stub, Method method, const Req& req, const std::string& address,
               std::chrono::milliseconds timeout, Unimplemented unimplemented = nullptr) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  Rep rep;
  const auto status = (stub.*method)(&ctx, req, &rep);
  if constexpr (!std::is_same_v<Unimplemented, std::nullptr_t>)
    if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED)
      unimplemented();
  if (!status.ok())
    throw_status(ctx, status, address, timeout);
  return rep;
}

}  // namespace uma::detail
