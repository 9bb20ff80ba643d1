#include <uma/actors/remote/wire/detail/wire_service.hpp>

#include <algorithm>

#include <uma/actors/remote/detail/remote_sessions.hpp>
#include <uma/actors/remote/wire/detail/snapshot_stream.hpp>
#include <uma/actors/remote/wire/detail/wire_convert.hpp>

namespace uma::detail {

namespace w = wire::v1;

wire_service::wire_service(caf::actor_system& sys, remote_allocator_actor gateway,
                           const wire_server_config& config, const peer_table& table)
    : sys_(sys),
      gateway_(std::move(gateway)),
      config_(config),
      table_(table),
      in_flight_(config.limits.max_in_flight, config.limits.max_in_flight_per_identity) {}

std::optional<peer_identity> wire_service::identify(ctx* c) const {
  return identify_peer(table_, c->peer());
}

template <class Body>
grpc::ServerUnaryReactor* wire_service::unary(ctx* c, Body body) {
  auto who = identify(c);
  if (!who || !in_flight_.acquire(who->tenant)) {
    ++refused_;
    auto* r = c->DefaultReactor();
    if (!who) {
      r->Finish({grpc::StatusCode::UNAUTHENTICATED, "the connection names no identity"});
    } else {
      c->AddTrailingMetadata("uma-errc", std::to_string(static_cast<int>(errc::quota_exceeded)));
      r->Finish({grpc::StatusCode::RESOURCE_EXHAUSTED,
                 "too many calls in flight (" + std::to_string(config_.limits.max_in_flight) +
                     " on the server, " +
                     std::to_string(config_.limits.max_in_flight_per_identity) +
                     " per identity); wait for replies"});
    }
    return r;
  }
  auto call = std::make_shared<wire_call>(c, std::move(*who), in_flight_);
  try {
    body(*call);
  } catch (const error& e) {
    call->fail(e);
  }
  return call->reactor();
}

session_key wire_service::owned(const wire_call& call, const w::SessionKey& k,
                                const char* op) const {
  if (!sessions_.owns(k.id(), call.who().tenant))
    throw to_uma_error(lookup_failure{op, k.id(), true}.to_error(nullptr));
  return from_wire(k);
}

template <class R, class Out, class... Ts>
void wire_service::forward(wire_call& call, Out* out, Ts... xs) {
  call.ask<R>(
      sys_, gateway_, config_.limits.call_timeout,
      [out](R& r) {
        if constexpr (std::is_same_v<R, std::uint64_t>)
          out->set_value(r);
        else
          to_wire(r, *out);
      },
      std::move(xs)...);
}

namespace {

[[noreturn]] void operator_only(const char* what) {
  raise(errc::invalid_argument,
        std::string(what) +
            " is the operator's: connect through the operator socket, or with a client "
            "certificate whose name the server lists as an operator's");
}

/// A stream refused before it began: finished at once with `status`.
template <class Event>
struct refused_stream final : grpc::ServerWriteReactor<Event> {
  explicit refused_stream(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

const grpc::Status no_identity{grpc::StatusCode::UNAUTHENTICATED,
                               "the connection names no identity"};

}  // namespace

grpc::ServerWriteReactor<w::SessionEvent>* wire_service::OpenSession(ctx* c,
                                                                     const w::OpenSessionRequest*) {
  auto who = identify(c);
  if (!who) {
    ++refused_;
    return new refused_stream<w::SessionEvent>(no_identity);
  }
  return new session_stream(sys_, gateway_, config_.limits.call_timeout, std::move(*who),
                            sessions_);
}

grpc::ServerUnaryReactor* wire_service::CloseSession(ctx* c, const w::CloseSessionRequest* req,
                                                     w::CountReply* out) {
  return unary(c, [&](wire_call& call) {
    const auto key = owned(call, req->session(), "close_session");
    call.ask<std::uint64_t>(
        sys_, gateway_, config_.limits.call_timeout,
        [this, out, sid = key.id](std::uint64_t& n) {
          out->set_value(n);
          sessions_.finish(sid);
        },
        close_session_atom_v, key);
  });
}

grpc::ServerUnaryReactor* wire_service::Allocate(ctx* c, const w::AllocateRequest* req,
                                                 w::RegionHandle* out) {
  return unary(c, [&](wire_call& call) {
    forward<region_handle>(call, out, allocate_atom_v, owned(call, req->session(), "allocate"),
                           from_wire(*req));
  });
}

grpc::ServerUnaryReactor* wire_service::Release(ctx* c, const w::RegionRequest* req,
                                                w::CountReply* out) {
  return unary(c, [&](wire_call& call) {
    forward<std::uint64_t>(call, out, release_atom_v, owned(call, req->session(), "release"),
                           from_wire(req->region()));
  });
}

grpc::ServerUnaryReactor* wire_service::Prefetch(ctx* c, const w::PrefetchRequest* req,
                                                 w::OpResult* out) {
  return unary(c, [&](wire_call& call) {
    forward<remote_op_result>(call, out, prefetch_atom_v, owned(call, req->session(), "prefetch"),
                              from_wire(*req));
  });
}

grpc::ServerUnaryReactor* wire_service::Discard(ctx* c, const w::DiscardRequest* req,
                                                w::OpResult* out) {
  return unary(c, [&](wire_call& call) {
    forward<remote_op_result>(call, out, discard_atom_v, owned(call, req->session(), "discard"),
                              from_wire(*req));
  });
}

grpc::ServerUnaryReactor* wire_service::Advise(ctx* c, const w::AdviseRequest* req,
                                               w::OpResult* out) {
  return unary(c, [&](wire_call& call) {
    forward<remote_op_result>(call, out, advise_atom_v, owned(call, req->session(), "advise"),
                              from_wire(*req));
  });
}

grpc::ServerUnaryReactor* wire_service::WillAccess(ctx* c, const w::AccessPlan* req,
                                                   w::ResidencyResult* out) {
  return unary(c, [&](wire_call& call) {
    forward<residency_result>(call, out, will_access_atom_v,
                              owned(call, req->session(), "will_access"), from_wire(*req));
  });
}

grpc::ServerUnaryReactor* wire_service::DoneWith(ctx* c, const w::RegionsRequest* req,
                                                 w::CountReply* out) {
  return unary(c, [&](wire_call& call) {
    forward<std::uint64_t>(call, out, done_with_atom_v, owned(call, req->session(), "done_with"),
                           from_wire(req->regions()));
  });
}

grpc::ServerUnaryReactor* wire_service::Dead(ctx* c, const w::RegionsRequest* req,
                                             w::ResidencyResult* out) {
  return unary(c, [&](wire_call& call) {
    forward<residency_result>(call, out, dead_atom_v, owned(call, req->session(), "dead"),
                              from_wire(req->regions()));
  });
}

grpc::ServerUnaryReactor* wire_service::GetAttributes(ctx* c, const w::RegionRequest* req,
                                                      w::Attributes* out) {
  return unary(c, [&](wire_call& call) {
    forward<remote_attributes>(call, out, attributes_atom_v,
                               owned(call, req->session(), "attributes"), from_wire(req->region()));
  });
}

grpc::ServerUnaryReactor* wire_service::GetStats(ctx* c, const w::StatsRequest*, w::Stats* out) {
  return unary(c, [&](wire_call& call) { forward<remote_stats>(call, out, stats_atom_v); });
}

grpc::ServerUnaryReactor* wire_service::Regions(ctx* c, const w::RegionsPageRequest* req,
                                                w::RegionsPage* out) {
  return unary(c, [&](wire_call& call) {
    const std::uint32_t cap = config_.limits.max_region_page;
    const region_page page{req->start(),
                           req->page_size() == 0 ? cap : std::min(req->page_size(), cap)};
    auto fill = [out, start = page.start](remote_region_page& p) {
      out->set_total(p.total);
      for (const auto& row : p.rows)
        to_wire(row, *out->add_rows());
      const auto end = start + p.rows.size();
      out->set_next_start(end < p.total ? end : 0);
    };
    if (call.who().is_operator)
      call.ask<remote_region_page>(sys_, gateway_, config_.limits.call_timeout, fill,
                                   regions_atom_v, config_.operator_secret, page);
    else
      call.ask<remote_region_page>(sys_, gateway_, config_.limits.call_timeout, fill,
                                   leased_regions_atom_v, owned(call, req->session(), "regions"),
                                   page);
  });
}

grpc::ServerUnaryReactor* wire_service::Quota(ctx* c, const w::QuotaRequest* req,
                                              w::CountReply* out) {
  return unary(c, [&](wire_call& call) {
    if (req->bytes() == 0)
      return forward<std::uint64_t>(call, out, quota_atom_v, std::uint64_t{0});
    if (!call.who().is_operator)
      operator_only("quota: setting the quota");
    forward<std::uint64_t>(call, out, set_quota_atom_v, config_.operator_secret, req->bytes());
  });
}

grpc::ServerUnaryReactor* wire_service::TakeSnapshot(ctx* c, const w::SnapshotRequest*,
                                                     w::Snapshot* out) {
  return unary(c, [&](wire_call& call) {
    if (!call.who().is_operator)
      operator_only("snapshot: a snapshot shows every tenant's regions and history; it");
    forward<remote_snapshot>(call, out, snapshot_atom_v, config_.operator_secret);
  });
}

grpc::ServerWriteReactor<w::Snapshot>* wire_service::StreamSnapshot(ctx* c,
                                                                    const w::SnapshotRequest*) {
  auto who = identify(c);
  if (!who) {
    ++refused_;
    return new refused_stream<w::Snapshot>(no_identity);
  }
  if (!who->is_operator) {
    const error e(errc::invalid_argument,
                  "snapshot: a snapshot shows every tenant's regions and history; it is the "
                  "operator's: connect through the operator socket, or with a client certificate "
                  "whose name the server lists as an operator's");
    c->AddTrailingMetadata("uma-errc", std::to_string(static_cast<int>(e.code())));
    return new refused_stream<w::Snapshot>(to_status(e));
  }
  if (!in_flight_.acquire(who->tenant)) {
    ++refused_;
    c->AddTrailingMetadata("uma-errc", std::to_string(static_cast<int>(errc::quota_exceeded)));
    return new refused_stream<w::Snapshot>(
        {grpc::StatusCode::RESOURCE_EXHAUSTED, "too many calls in flight; wait for replies"});
  }
  return new snapshot_stream(c, sys_, gateway_, config_.limits.call_timeout,
                             config_.operator_secret,
                             [this, tenant = who->tenant] { in_flight_.release(tenant); });
}

grpc::ServerUnaryReactor* wire_service::Restart(ctx* c, const w::RestartRequest*,
                                                w::CountReply* out) {
  return unary(c, [&](wire_call& call) {
    if (!call.who().is_operator)
      operator_only("restart: restarting the allocator");
    forward<std::uint64_t>(call, out, restart_atom_v, config_.operator_secret);
  });
}

}  // namespace uma::detail
