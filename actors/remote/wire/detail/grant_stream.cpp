#include <uma/actors/remote/wire/detail/grant_stream.hpp>

#include <uma/actors/remote/wire/detail/arbiter_convert.hpp>
#include <uma/actors/remote/wire/detail/arbiter_service.hpp>
#include <uma/actors/remote/wire/detail/wire_call.hpp>

namespace uma::detail {

void grant_stream::outbox::send(const arbiter_grant& g) {
  std::lock_guard lock(mutex);
  if (finished)
    return;
  if (queue.size() >= max_queued) {
    // A member that does not read its grants would make the node queue them without end: its
    // stream ends (it leaves, and its bytes are free).
    finished = true;
    if (reactor != nullptr)
      reactor->Finish(
          {grpc::StatusCode::RESOURCE_EXHAUSTED, "the member left " + std::to_string(max_queued) +
                                                     " grants unread: its membership ends"});
    return;
  }
  to_wire(g, queue.emplace_back());
  pump();
}

void grant_stream::outbox::pump() {
  if (reactor == nullptr || finished || writing || !started || queue.empty())
    return;
  reactor->writing_ = std::move(queue.front());
  queue.pop_front();
  writing = true;
  reactor->StartWrite(&reactor->writing_);
}

void grant_stream::outbox::end(const grpc::Status& status) {
  std::lock_guard lock(mutex);
  if (reactor == nullptr || finished)
    return;
  finished = true;
  reactor->Finish(status);
}

grant_stream::grant_stream(grpc::CallbackServerContext* c, std::shared_ptr<arbiter> arb,
                           member_keys& keys, const std::string& identity,
                           const wire::v1::JoinRequest& req)
    : arbiter_(std::move(arb)), keys_(keys), out_(std::make_shared<outbox>()) {
  out_->reactor = this;
  if (identity.empty()) {
    out_->end({grpc::StatusCode::UNAUTHENTICATED, "the connection names no identity"});
    return;
  }
  std::vector<arbiter_claim> claims;
  claims.reserve(static_cast<std::size_t>(req.devices_size()));
  for (const auto& d : req.devices())
    claims.push_back(from_wire(d));
  try {
    member_ = arbiter_->join(identity, req.name(), std::move(claims), out_);
  } catch (const error& e) {
    c->AddTrailingMetadata("uma-errc", std::to_string(static_cast<int>(e.code())));
    out_->end(to_status(e));
    return;
  } catch (const std::exception& e) {
    out_->end({grpc::StatusCode::INTERNAL, std::string("join: ") + e.what()});
    return;
  }
  wire::v1::GrantEvent first;
  *first.mutable_key() = keys_.add(member_, identity);
  std::lock_guard lock(out_->mutex);
  out_->queue.push_front(std::move(first));
  out_->started = true;
  out_->pump();
}

void grant_stream::OnWriteDone(bool ok) {
  {
    std::lock_guard lock(out_->mutex);
    out_->writing = false;
    if (ok) {
      out_->pump();
      return;
    }
  }
  out_->end(grpc::Status(grpc::StatusCode::CANCELLED, "the member's stream broke"));
}

void grant_stream::OnCancel() {
  out_->end(grpc::Status(grpc::StatusCode::CANCELLED, "the member left"));
}

void grant_stream::OnDone() {
  {
    std::lock_guard lock(out_->mutex);
    out_->reactor = nullptr;
    out_->finished = true;
  }
  if (member_ != 0) {
    arbiter_->leave(member_, "its stream ended (it left, or its connection dropped)");
    keys_.forget(member_);
  }
  delete this;
}

}  // namespace uma::detail
