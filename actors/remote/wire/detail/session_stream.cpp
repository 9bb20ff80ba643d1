#include <uma/actors/remote/wire/detail/session_stream.hpp>

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

#include <uma/actors/remote/wire/detail/wire_call.hpp>
#include <uma/actors/remote/wire/detail/wire_convert.hpp>

namespace uma::detail {

void stream_state::end(const grpc::Status& status) {
  std::lock_guard lock(mutex);
  if (reactor == nullptr || finished)
    return;
  finished = true;
  reactor->Finish(status);
}

void session_book::opened(std::uint64_t sid, std::string tenant,
                          std::shared_ptr<stream_state> stream) {
  std::lock_guard lock(mutex_);
  sessions_.insert_or_assign(sid, entry{std::move(tenant), std::move(stream)});
}

void session_book::forget(std::uint64_t sid) {
  std::lock_guard lock(mutex_);
  sessions_.erase(sid);
}

bool session_book::owns(std::uint64_t sid, const std::string& tenant) const {
  std::lock_guard lock(mutex_);
  const auto it = sessions_.find(sid);
  return it != sessions_.end() && it->second.tenant == tenant;
}

void session_book::finish(std::uint64_t sid) {
  std::shared_ptr<stream_state> stream;
  {
    std::lock_guard lock(mutex_);
    if (auto it = sessions_.find(sid); it != sessions_.end())
      stream = it->second.stream;
  }
  if (stream)
    stream->end(grpc::Status::OK);
}

namespace {

/// The session's peer as the gateway sees it: an actor that does nothing but live as long as
/// the stream. When the gateway ends it (the session expired as idle), the stream ends with it:
/// the connection then has no call left, and gRPC closes it once idle.
caf::behavior holder_behavior(caf::event_based_actor* self, std::shared_ptr<stream_state> state) {
  self->attach_functor([state](const caf::error&) {
    state->end(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the session ended: idle"));
  });
  return {[](std::int32_t) {}};
}

}  // namespace

session_stream::session_stream(caf::actor_system& sys, const remote_allocator_actor& gateway,
                               std::chrono::milliseconds timeout, peer_identity who,
                               session_book& book)
    : book_(book), who_(std::move(who)), state_(std::make_shared<stream_state>()) {
  state_->reactor = this;
  holder_ = sys.spawn(holder_behavior, state_);
  sys.spawn(
      [gateway, timeout, holder = holder_, tenant = who_.tenant](
          caf::event_based_actor* self, std::shared_ptr<stream_state> state) {
        self->request(gateway, caf::duration{timeout}, open_tenant_session_atom_v, holder, tenant)
            .then(
                [state](session_key& k) {
                  std::lock_guard lock(state->mutex);
                  if (state->reactor != nullptr && !state->finished)
                    state->reactor->opened(k);
                },
                [state](caf::error& err) {
                  const auto e = err.category() == error_category
                                     ? to_uma_error(err)
                                     : error(errc::backend_error,
                                             "open_session: the gateway did not answer (" +
                                                 caf::to_string(err) + ")");
                  std::lock_guard lock(state->mutex);
                  if (state->reactor != nullptr && !state->finished)
                    state->reactor->refused(to_status(e));
                });
      },
      state_);
}

void session_stream::opened(const session_key& key) {  // state->mutex held
  sid_ = key.id;
  book_.opened(key.id, who_.tenant, state_);
  to_wire(key, *event_.mutable_key());
  StartWrite(&event_);
}

void session_stream::refused(const grpc::Status& status) {  // state->mutex held
  state_->finished = true;
  Finish(status);
}

void session_stream::OnWriteDone(bool ok) {
  if (!ok)
    state_->end(grpc::Status(grpc::StatusCode::CANCELLED, "the session's stream broke"));
  // Otherwise the stream stays open, with nothing more to send: it is the session's lifetime.
}

void session_stream::OnCancel() {
  state_->end(grpc::Status(grpc::StatusCode::CANCELLED, "the session ended"));
}

void session_stream::OnDone() {
  {
    std::lock_guard lock(state_->mutex);
    state_->reactor = nullptr;
  }
  if (sid_ != 0)
    book_.forget(sid_);
  // The gateway monitors the holder: its exit ends the session and releases its leases.
  caf::anon_send_exit(holder_, caf::exit_reason::user_shutdown);
  delete this;
}

}  // namespace uma::detail
