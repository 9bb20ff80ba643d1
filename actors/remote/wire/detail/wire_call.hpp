#pragma once

// One gRPC call of the wire in flight: who made it, the counters it holds, and how it ends.
// A call's body sends one CAF request to the gateway from a short-lived event-based actor; the
// reply (or error, or timeout) finishes the gRPC call from that actor. No thread waits.

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/grpcpp.h>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include <uma/actors/remote/wire/detail/unix_listener.hpp>
#include <uma/messages/error_category.hpp>
#include <uma/messages/remote_interface.hpp>

namespace uma::detail {

/// The gRPC status of a uma error: the code mapped to gRPC's nearest, the message unchanged; the
/// uma code itself goes in the trailing metadata "uma-errc" (set by `finish_with`).
[[nodiscard]] grpc::Status to_status(const error& e);

/// Calls in flight, on the server and per identity: every kind counts (stats and regions too).
class in_flight_counter {
 public:
  in_flight_counter(std::uint32_t max_total, std::uint32_t max_per_identity)
      : max_total_(max_total), max_per_identity_(max_per_identity) {}
  /// Takes one slot for `who`; false (nothing taken) when a cap is reached.
  [[nodiscard]] bool acquire(const std::string& who);
  void release(const std::string& who);

 private:
  std::mutex mutex_;
  std::uint32_t total_ = 0;
  std::map<std::string, std::uint32_t> by_identity_;
  std::uint32_t max_total_;
  std::uint32_t max_per_identity_;
};

/// A unary call being served: finishes its reactor exactly once and then gives its slot back.
class wire_call : public std::enable_shared_from_this<wire_call> {
 public:
  wire_call(grpc::CallbackServerContext* ctx, peer_identity who, in_flight_counter& counter)
      : ctx_(ctx), reactor_(ctx->DefaultReactor()), who_(std::move(who)), counter_(counter) {}
  wire_call(const wire_call&) = delete;
  wire_call& operator=(const wire_call&) = delete;

  [[nodiscard]] const peer_identity& who() const noexcept { return who_; }
  [[nodiscard]] grpc::ServerUnaryReactor* reactor() const noexcept { return reactor_; }
  void ok() { finish(grpc::Status::OK); }
  void fail(const error& e);
  void finish(const grpc::Status& status);

  /// Sends `xs...` to `gateway` from a fresh event-based actor; its reply goes to `on_reply`
  /// (which fills the response message; it may throw `uma::error`), an error fails the call. A
  /// gateway silent for `timeout` fails it with `timeout`.
  template <class R, class OnReply, class... Ts>
  void ask(caf::actor_system& sys, const remote_allocator_actor& gateway,
           std::chrono::milliseconds timeout, OnReply on_reply, Ts... xs) {
    // The call travels as the actor's argument: CAF 0.17 dereferences a null argument tuple
    // when a function-based actor is spawned without arguments.
    sys.spawn(
        [gateway, timeout, on_reply, xs...](caf::event_based_actor* self,
                                            std::shared_ptr<wire_call> call) {
          self->request(gateway, caf::duration{timeout}, xs...)
              .then(
                  [call, on_reply](R& r) {
                    try {
                      on_reply(r);
                      call->ok();
                    } catch (const error& e) {
                      call->fail(e);
                    }
                  },
                  [call, timeout](caf::error& err) { call->fail_with(err, timeout); });
        },
        shared_from_this());
  }

  void fail_with(const caf::error& err, std::chrono::milliseconds timeout);

 private:
  grpc::CallbackServerContext* ctx_;
  grpc::ServerUnaryReactor* reactor_;
  peer_identity who_;
  in_flight_counter& counter_;
  std::atomic<bool> done_{false};
};

}  // namespace uma::detail
