#pragma once

// The operator's snapshot as a stream (rpc StreamSnapshot): the gateway's snapshot sent as
// messages of at most about 1 MiB each (`split_snapshot`), so that no size of the region table
// or the history can push it past the wire's message cap (issue 35, finding 4: with 65,536
// leases the one-message TakeSnapshot failed, "Sent message larger than max"). The first message
// carries everything but the regions and events; every message after it carries regions, then
// events, in their order (`split_snapshot`, wire_convert.hpp).

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <caf/actor_system.hpp>

#include <remote.grpc.pb.h>

#include <uma/messages/remote_interface.hpp>

namespace uma::detail {

class snapshot_stream;

/// What the reactor and the gateway's reply share: the reactor, until gRPC is done with it.
struct snapshot_state {
  std::mutex mutex;
  snapshot_stream* reactor = nullptr;
};

/// The reactor of one StreamSnapshot call (the operator's). Deletes itself when gRPC is done
/// with it, and then calls `done` (which gives back the call's slot in flight).
class snapshot_stream final : public grpc::ServerWriteReactor<wire::v1::Snapshot> {
 public:
  snapshot_stream(grpc::CallbackServerContext* ctx, caf::actor_system& sys,
                  const remote_allocator_actor& gateway, std::chrono::milliseconds timeout,
                  const operator_key& key, std::function<void()> done);

  void OnWriteDone(bool ok) override;
  void OnDone() override;

  /// The gateway's snapshot: its messages go out one after the other (state mutex held).
  void send(const remote_snapshot& s);
  /// The gateway refused or did not answer (state mutex held).
  void refuse(const error& e);

 private:
  grpc::CallbackServerContext* ctx_;
  std::shared_ptr<snapshot_state> state_;
  std::function<void()> done_;
  std::vector<wire::v1::Snapshot> parts_;
  std::size_t next_ = 0;
};

}  // namespace uma::detail
