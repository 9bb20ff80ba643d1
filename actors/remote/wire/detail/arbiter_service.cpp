#include <uma/actors/remote/wire/detail/arbiter_service.hpp>

#include <uma/actors/remote/detail/remote_sessions.hpp>
#include <uma/actors/remote/wire/detail/arbiter_convert.hpp>
#include <uma/actors/remote/wire/detail/grant_stream.hpp>
#include <uma/actors/remote/wire/detail/wire_call.hpp>

namespace uma::detail {

namespace w = wire::v1;

w::MemberKey member_keys::add(std::uint64_t member, const std::string& identity) {
  entry e{identity};
  random_secret(e.hi, e.lo);
  w::MemberKey key;
  key.set_id(member);
  key.set_secret_hi(e.hi);
  key.set_secret_lo(e.lo);
  std::lock_guard lock(mutex_);
  keys_.insert_or_assign(member, std::move(e));
  return key;
}

void member_keys::forget(std::uint64_t member) {
  std::lock_guard lock(mutex_);
  keys_.erase(member);
}

std::uint64_t member_keys::check(const w::MemberKey& key, const std::string& identity,
                                 const char* op) const {
  std::lock_guard lock(mutex_);
  const auto it = keys_.find(key.id());
  if (it == keys_.end() || it->second.identity != identity ||
      ((it->second.hi ^ key.secret_hi()) | (it->second.lo ^ key.secret_lo())) != 0)
    raise(errc::invalid_argument, std::string(op) + ": member " + std::to_string(key.id()) +
                                      " is not one of this connection's (never joined, left, "
                                      "or joined by another identity)");
  return key.id();
}

template <class Body>
grpc::ServerUnaryReactor* arbiter_service::answer(ctx* c, Body body) {
  auto* r = c->DefaultReactor();
  const auto who = identify_peer(table_, c->peer());
  if (!who) {
    r->Finish({grpc::StatusCode::UNAUTHENTICATED, "the connection names no identity"});
    return r;
  }
  try {
    body(*who);
    r->Finish(grpc::Status::OK);
  } catch (const error& e) {
    c->AddTrailingMetadata("uma-errc", std::to_string(static_cast<int>(e.code())));
    r->Finish(to_status(e));
  } catch (const std::exception& e) {  // out of memory: nothing escapes into gRPC
    r->Finish({grpc::StatusCode::INTERNAL, e.what()});
  }
  return r;
}

grpc::ServerWriteReactor<w::GrantEvent>* arbiter_service::Join(ctx* c, const w::JoinRequest* req) {
  const auto who = identify_peer(table_, c->peer());
  return new grant_stream(c, arbiter_, keys_, who ? who->tenant : std::string{}, *req);
}

grpc::ServerUnaryReactor* arbiter_service::Demand(ctx* c, const w::DemandRequest* req,
                                                  w::ArbiterAck*) {
  return answer(c, [&](const peer_identity& who) {
    const auto id = keys_.check(req->key(), who.tenant, "demand");
    arbiter_->demand(id, who.tenant, req->device(), req->wanted_bytes(), req->idle());
  });
}

grpc::ServerUnaryReactor* arbiter_service::Evicted(ctx* c, const w::EvictedRequest* req,
                                                   w::ArbiterAck*) {
  return answer(c, [&](const peer_identity& who) {
    const auto id = keys_.check(req->key(), who.tenant, "evicted");
    arbiter_->evicted(id, who.tenant, req->device(), req->sequence(), req->resident_bytes());
  });
}

grpc::ServerUnaryReactor* arbiter_service::Report(ctx* c, const w::ArbiterReportRequest*,
                                                  w::ArbiterReport* out) {
  return answer(c, [&](const peer_identity& who) {
    to_wire(arbiter_->report(who.is_operator ? std::string{} : who.tenant), *out);
  });
}

namespace {

void operator_only(const peer_identity& who, const char* op) {
  if (!who.is_operator)
    raise(errc::invalid_argument,
          std::string(op) + " is the operator's: connect to the operator socket");
}

}  // namespace

grpc::ServerUnaryReactor* arbiter_service::SetPolicy(ctx* c, const w::PolicyRequest* req,
                                                     w::ArbiterReport* out) {
  return answer(c, [&](const peer_identity& who) {
    operator_only(who, "set_policy");
    arbiter_->set_policy(req->tenant(), req->device(),
                         {req->min_bytes(), req->priority(), req->weight()});
    to_wire(arbiter_->report(), *out);
  });
}

grpc::ServerUnaryReactor* arbiter_service::SetTotal(ctx* c, const w::TotalRequest* req,
                                                    w::ArbiterReport* out) {
  return answer(c, [&](const peer_identity& who) {
    operator_only(who, "set_total");
    arbiter_->set_total(req->device(), req->total_bytes());
    to_wire(arbiter_->report(), *out);
  });
}

}  // namespace uma::detail
