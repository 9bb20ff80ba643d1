#pragma once

// A member's Join stream (actors/remote/wire/arbiter.proto): its first event the member's key,
// then every grant the arbiter sends it, in order. The membership lives as long as the stream:
// when the client cancels it or its connection drops, the member leaves and its bytes are free.

#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/grpcpp.h>

#include <arbiter.grpc.pb.h>

#include <uma/actors/remote/arbiter/arbiter.hpp>

namespace uma::detail {

class member_keys;

/// The reactor of one Join call; deletes itself when gRPC is done with it.
class grant_stream final : public grpc::ServerWriteReactor<wire::v1::GrantEvent> {
 public:
  /// Joins `arb` for `identity`; the stream ends at once with the refusal when the join fails.
  grant_stream(grpc::CallbackServerContext* c, std::shared_ptr<arbiter> arb, member_keys& keys,
               const std::string& identity, const wire::v1::JoinRequest& req);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  /// What the arbiter's sink and the reactor share; grants queue here until written.
  struct outbox final : arbiter_sink {
    std::mutex mutex;
    grant_stream* reactor = nullptr;  // null once gRPC is done with it
    /// Grants written when the member reads; past `max_queued` unread the stream ends.
    static constexpr std::size_t max_queued = 1024;
    std::deque<wire::v1::GrantEvent> queue;
    bool writing = false;
    bool started = false;  // the key went first
    bool finished = false;
    void send(const arbiter_grant& g) override;
    /// Starts the next write if none is under way (mutex held).
    void pump();
    void end(const grpc::Status& status);
  };

  std::shared_ptr<arbiter> arbiter_;
  member_keys& keys_;
  std::shared_ptr<outbox> out_;
  wire::v1::GrantEvent writing_;
  std::uint64_t member_ = 0;
};

}  // namespace uma::detail
