#pragma once

// The allocator supervisor's book of requests that wait on an incarnation
// (actors/allocator_supervisor.cpp): those that arrived between incarnations, those forwarded to
// the current one and not answered yet, and explicit restarts waiting for the next one. Each
// holds a function that answers it with an error, and the book is the one place that makes
// sure every waiter is answered exactly once: CAF 0.17 drops an undelivered response promise
// silently, so a request the supervisor forgot would leave its caller waiting out its timeout.
// Plain data with callables (no actor, no lock): the supervisor owns one and uses it only from
// its own handlers.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <vector>

#include <caf/fwd.hpp>

namespace uma::detail {

/// Requests waiting on an incarnation. Each kind is answered in arrival order. Every entry is
/// taken out of the book before its function runs, so each function is called at most once
/// and a function may use the book: an entry it adds while the book runs or fails its kind is
/// run or failed in the same call (after the ones before it), one it erases that was already
/// taken out is still answered. A function that throws does not stop the others: the rest of
/// the call runs, then the first exception is rethrown (the entries are gone all the same).
class waiting_requests {
 public:
  /// Answers a waiter with the error that ends its wait.
  using fail_fn = std::function<void(const caf::error&)>;
  /// Names a forwarded request until its reply comes (`forwarded`, `answered`).
  using in_flight_id = std::uint64_t;

  // -- between incarnations -------------------------------------------------------------------

  /// A request arrived while no incarnation serves: `run` forwards it to the next one, `fail`
  /// answers it if none comes.
  void stash(std::function<void()> run, fail_fn fail);
  /// An explicit restart waits for the next incarnation: `started` gets its generation.
  void await_restart(std::function<void(std::uint64_t)> started, fail_fn fail);
  /// Incarnation `generation` serves: runs the stashed requests in arrival order, then tells
  /// the restart waiters `generation`.
  void incarnation_started(std::uint64_t generation);
  /// No incarnation will come: fails the stashed requests, then the restart waiters, with `err`.
  void fail_waiting(const caf::error& err);

  // -- forwarded to the current incarnation ----------------------------------------------------

  /// A request was forwarded to the incarnation: `fail` answers it if the reply never comes.
  /// Returns the id its reply handler gives to `answered`.
  [[nodiscard]] in_flight_id forwarded(fail_fn fail);
  /// The reply (or error) for `id` came: its entry goes. False when the book has no `id`
  /// (already answered, or taken out to be failed): nothing changes.
  bool answered(in_flight_id id) noexcept;
  /// The replies will never come (the supervisor stops): fails every forwarded request with
  /// `err`, in the order they were forwarded.
  void fail_in_flight(const caf::error& err);

  /// Fails everything the book holds with `err`: `fail_waiting`, then `fail_in_flight`.
  void fail_all(const caf::error& err);

  // -- queries ---------------------------------------------------------------------------------

  /// Requests stashed for the next incarnation.
  [[nodiscard]] std::size_t stashed() const noexcept { return stash_.size(); }
  /// Explicit restarts waiting for the next incarnation.
  [[nodiscard]] std::size_t restart_waiters() const noexcept { return restarts_.size(); }
  /// Forwarded requests not answered yet.
  [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_.size(); }
  /// Whether nothing waits.
  [[nodiscard]] bool empty() const noexcept {
    return stash_.empty() && restarts_.empty() && in_flight_.empty();
  }

 private:
  // The failing calls, keeping the first exception a fail function threw in `first`.
  void fail_waiting(const caf::error& err, std::exception_ptr& first);
  void fail_in_flight(const caf::error& err, std::exception_ptr& first);

  struct stashed_request {
    std::function<void()> run;
    fail_fn fail;
  };
  struct restart_waiter {
    std::function<void(std::uint64_t)> started;
    fail_fn fail;
  };

  std::vector<stashed_request> stash_;
  std::vector<restart_waiter> restarts_;
  std::map<in_flight_id, fail_fn> in_flight_;  // by id: the order they were forwarded
  in_flight_id next_id_ = 0;
};

}  // namespace uma::detail
