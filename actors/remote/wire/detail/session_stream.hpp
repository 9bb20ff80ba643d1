#pragma once

// A session's stream (rpc OpenSession): the gateway's session lives as long as it. The server
// spawns a holder actor for the session, which the gateway monitors as the session's peer; when
// the stream ends (the client cancels it, closes the session, or its connection drops and gRPC
// cancels the call), the holder exits and the gateway releases the session's leases.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/grpcpp.h>
#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include <remote.grpc.pb.h>

#include <uma/actors/remote/wire/detail/unix_listener.hpp>
#include <uma/messages/remote_interface.hpp>

namespace uma::detail {

class session_stream;

/// What a stream's reactor and the CAF reply that opens its session share: the reactor, until
/// gRPC is done with it. Ends the stream at most once.
struct stream_state {
  std::mutex mutex;
  session_stream* reactor = nullptr;
  bool finished = false;
  /// Finishes the stream with `status` unless it finished already or is gone.
  void end(const grpc::Status& status);
};

/// The open sessions of the wire: which identity opened each, and its stream.
class session_book {
 public:
  void opened(std::uint64_t sid, std::string tenant, std::shared_ptr<stream_state> stream);
  void forget(std::uint64_t sid);
  /// True when session `sid` is open and `tenant` opened it.
  [[nodiscard]] bool owns(std::uint64_t sid, const std::string& tenant) const;
  /// Ends session `sid`'s stream (the client closed the session).
  void finish(std::uint64_t sid);

 private:
  struct entry {
    std::string tenant;
    std::shared_ptr<stream_state> stream;
  };
  mutable std::mutex mutex_;
  std::map<std::uint64_t, entry> sessions_;
};

/// The reactor of one OpenSession call. Deletes itself when gRPC is done with it.
class session_stream final : public grpc::ServerWriteReactor<wire::v1::SessionEvent> {
 public:
  session_stream(caf::actor_system& sys, const remote_allocator_actor& gateway,
                 std::chrono::milliseconds timeout, peer_identity who, session_book& book);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  /// The gateway's reply: the key goes to the client as the stream's first event.
  void opened(const session_key& key);
  /// The gateway refused (or did not answer): the stream ends with that error.
  void refused(const grpc::Status& status);

 private:
  session_book& book_;
  peer_identity who_;
  caf::actor holder_;
  std::shared_ptr<stream_state> state_;
  wire::v1::SessionEvent event_;
  std::uint64_t sid_ = 0;
};

}  // namespace uma::detail
