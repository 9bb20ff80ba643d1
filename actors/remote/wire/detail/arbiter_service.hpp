#pragma once

// The arbiter served over gRPC (actors/remote/wire/arbiter.proto, uma.wire.v1.Arbiter), beside
// the remote interface on the same listeners: the caller's identity from its connection (the
// wire's peer table), a member named by its id and secret and only by the identity that joined,
// the operator's calls refused to tenants. Every call is answered at once: the arbiter's book
// does no waiting, so no call parks a thread.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include <arbiter.grpc.pb.h>

#include <uma/actors/remote/arbiter/arbiter.hpp>
#include <uma/actors/remote/wire/detail/unix_listener.hpp>

namespace uma::detail {

/// The members' keys: which identity joined each, with the secret drawn then.
class member_keys {
 public:
  /// Draws a secret for `member` of `identity`.
  [[nodiscard]] wire::v1::MemberKey add(std::uint64_t member, const std::string& identity);
  void forget(std::uint64_t member);
  /// The member `key` names, when `identity` joined it and the secret matches; invalid_argument
  /// that does not say which part was wrong otherwise.
  [[nodiscard]] std::uint64_t check(const wire::v1::MemberKey& key, const std::string& identity,
                                    const char* op) const;

 private:
  struct entry {
    std::string identity;
    std::uint64_t hi = 0, lo = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::uint64_t, entry> keys_;
};

class arbiter_service final : public wire::v1::Arbiter::CallbackService {
 public:
  arbiter_service(std::shared_ptr<arbiter> arb, const peer_table& table)
      : arbiter_(std::move(arb)), table_(table) {}

  using ctx = grpc::CallbackServerContext;
  using unary_reactor = grpc::ServerUnaryReactor;

  grpc::ServerWriteReactor<wire::v1::GrantEvent>* Join(ctx* c,
                                                       const wire::v1::JoinRequest* req) override;
  unary_reactor* Demand(ctx* c, const wire::v1::DemandRequest* req,
                        wire::v1::ArbiterAck* out) override;
  unary_reactor* Evicted(ctx* c, const wire::v1::EvictedRequest* req,
                         wire::v1::ArbiterAck* out) override;
  unary_reactor* Report(ctx* c, const wire::v1::ArbiterReportRequest* req,
                        wire::v1::ArbiterReport* out) override;
  unary_reactor* SetPolicy(ctx* c, const wire::v1::PolicyRequest* req,
                           wire::v1::ArbiterReport* out) override;
  unary_reactor* SetTotal(ctx* c, const wire::v1::TotalRequest* req,
                          wire::v1::ArbiterReport* out) override;

 private:
  /// Runs `body(identity)` for an identified caller and finishes the call with its outcome (a
  /// uma::error it throws: the error's status, its code in "uma-errc").
  template <class Body>
  unary_reactor* answer(ctx* c, Body body);

  std::shared_ptr<arbiter> arbiter_;
  const peer_table& table_;
  member_keys keys_;
};

}  // namespace uma::detail
