#pragma once

// The gRPC service of the wire (actors/remote/wire/remote.proto): every handler names the caller
// from its connection, counts the call against the in-flight caps, checks that a session named in
// the request is the caller's, and forwards to the gateway (actors/remote/remote_gateway.hpp),
// whose checks and bookkeeping (sessions, leases, quotas, caps) are the only ones.

#include <atomic>
#include <cstdint>
#include <optional>

#include <grpcpp/grpcpp.h>
#include <caf/actor_system.hpp>

#include <remote.grpc.pb.h>

#include <uma/actors/remote/wire/detail/session_stream.hpp>
#include <uma/actors/remote/wire/detail/unix_listener.hpp>
#include <uma/actors/remote/wire/detail/wire_call.hpp>
#include <uma/actors/remote/wire/wire_config.hpp>
#include <uma/messages/remote_interface.hpp>

namespace uma::detail {

class wire_service final : public wire::v1::Remote::CallbackService {
 public:
  wire_service(caf::actor_system& sys, remote_allocator_actor gateway,
               const wire_server_config& config, const peer_table& table);

  /// Calls refused for a bound (in-flight caps) or an unknown identity.
  [[nodiscard]] std::uint64_t refused() const noexcept { return refused_.load(); }

  using ctx = grpc::CallbackServerContext;
  using unary_reactor = grpc::ServerUnaryReactor;

  grpc::ServerWriteReactor<wire::v1::SessionEvent>* OpenSession(
      ctx* c, const wire::v1::OpenSessionRequest* req) override;
  unary_reactor* CloseSession(ctx* c, const wire::v1::CloseSessionRequest* req,
                              wire::v1::CountReply* out) override;
  unary_reactor* Allocate(ctx* c, const wire::v1::AllocateRequest* req,
                          wire::v1::RegionHandle* out) override;
  unary_reactor* Release(ctx* c, const wire::v1::RegionRequest* req,
                         wire::v1::CountReply* out) override;
  unary_reactor* Prefetch(ctx* c, const wire::v1::PrefetchRequest* req,
                          wire::v1::OpResult* out) override;
  unary_reactor* Discard(ctx* c, const wire::v1::DiscardRequest* req,
                         wire::v1::OpResult* out) override;
  unary_reactor* Advise(ctx* c, const wire::v1::AdviseRequest* req,
                        wire::v1::OpResult* out) override;
  unary_reactor* WillAccess(ctx* c, const wire::v1::AccessPlan* req,
                            wire::v1::ResidencyResult* out) override;
  unary_reactor* DoneWith(ctx* c, const wire::v1::RegionsRequest* req,
                          wire::v1::CountReply* out) override;
  unary_reactor* Dead(ctx* c, const wire::v1::RegionsRequest* req,
                      wire::v1::ResidencyResult* out) override;
  unary_reactor* GetAttributes(ctx* c, const wire::v1::RegionRequest* req,
                               wire::v1::Attributes* out) override;
  unary_reactor* GetStats(ctx* c, const wire::v1::StatsRequest* req, wire::v1::Stats* out) override;
  unary_reactor* Regions(ctx* c, const wire::v1::RegionsPageRequest* req,
                         wire::v1::RegionsPage* out) override;
  unary_reactor* Quota(ctx* c, const wire::v1::QuotaRequest* req,
                       wire::v1::CountReply* out) override;
  unary_reactor* TakeSnapshot(ctx* c, const wire::v1::SnapshotRequest* req,
                              wire::v1::Snapshot* out) override;
  grpc::ServerWriteReactor<wire::v1::Snapshot>* StreamSnapshot(
      ctx* c, const wire::v1::SnapshotRequest* req) override;
  unary_reactor* Restart(ctx* c, const wire::v1::RestartRequest* req,
                         wire::v1::CountReply* out) override;

 private:
  /// The caller of `c`, from the peer table (Unix-socket connections by their uid, TLS ones by
  /// their certificate). Nullopt when the table names none.
  [[nodiscard]] std::optional<peer_identity> identify(ctx* c) const;
  /// Runs `body` for a call of an identified caller within the in-flight caps; a `uma::error`
  /// it throws fails the call.
  template <class Body>
  unary_reactor* unary(ctx* c, Body body);
  /// The key of a session the caller opened; throws the gateway's own "not open" refusal.
  [[nodiscard]] session_key owned(const wire_call& call, const wire::v1::SessionKey& k,
                                  const char* op) const;
  /// Sends `xs...` to the gateway; its reply of type R is written to `out` by `to_wire`.
  template <class R, class Out, class... Ts>
  void forward(wire_call& call, Out* out, Ts... xs);

  caf::actor_system& sys_;
  remote_allocator_actor gateway_;
  const wire_server_config& config_;
  const peer_table& table_;
  in_flight_counter in_flight_;
  session_book sessions_;
  std::atomic<std::uint64_t> refused_{0};
};

}  // namespace uma::detail
