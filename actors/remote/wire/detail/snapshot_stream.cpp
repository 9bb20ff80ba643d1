#include <uma/actors/remote/wire/detail/snapshot_stream.hpp>

#include <caf/event_based_actor.hpp>

#include <uma/actors/remote/wire/detail/wire_call.hpp>
#include <uma/actors/remote/wire/detail/wire_convert.hpp>

namespace uma::detail {

namespace w = wire::v1;

snapshot_stream::snapshot_stream(grpc::CallbackServerContext* ctx, caf::actor_system& sys,
                                 const remote_allocator_actor& gateway,
                                 std::chrono::milliseconds timeout, const operator_key& key,
                                 std::function<void()> done)
    : ctx_(ctx), state_(std::make_shared<snapshot_state>()), done_(std::move(done)) {
  state_->reactor = this;
  sys.spawn(
      [gateway, timeout, key](caf::event_based_actor* self, std::shared_ptr<snapshot_state> state) {
        self->request(gateway, caf::duration{timeout}, snapshot_atom_v, key)
            .then(
                [state](remote_snapshot& s) {
                  std::lock_guard lock(state->mutex);
                  if (state->reactor != nullptr)
                    state->reactor->send(s);
                },
                [state, timeout](caf::error& err) {
                  const auto e =
                      err.category() == error_category
                          ? to_uma_error(err)
                          : error(errc::timeout, "snapshot: the gateway did not answer within " +
                                                     std::to_string(timeout.count()) + " ms (" +
                                                     caf::to_string(err) + ")");
                  std::lock_guard lock(state->mutex);
                  if (state->reactor != nullptr)
                    state->reactor->refuse(e);
                });
      },
      state_);
}

void snapshot_stream::send(const remote_snapshot& s) {
  w::Snapshot full;
  to_wire(s, full);
  parts_ = split_snapshot(std::move(full), 1u << 20);
  next_ = 1;
  StartWrite(&parts_.front());
}

void snapshot_stream::refuse(const error& e) {
  ctx_->AddTrailingMetadata("uma-errc", std::to_string(static_cast<int>(e.code())));
  Finish(to_status(e));
}

void snapshot_stream::OnWriteDone(bool ok) {
  if (!ok)
    return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the snapshot's stream broke"));
  if (next_ == parts_.size())
    return Finish(grpc::Status::OK);
  StartWrite(&parts_[next_++]);
}

void snapshot_stream::OnDone() {
  {
    std::lock_guard lock(state_->mutex);
    state_->reactor = nullptr;
  }
  if (done_)
    done_();
  delete this;
}

}  // namespace uma::detail
