#include <uma/actors/detail/waiting_requests.hpp>

#include <exception>
#include <utility>

namespace uma::detail {

namespace {

/// Calls `call` on each entry of `entries` in order, each taken out of the book first; entries
/// added meanwhile are called too, after those before them. The first exception a call throws
/// is kept in `first` and the others go on (every waiter is answered, whatever one of them does).
template <class Entries, class Call>
void drain(Entries& entries, std::exception_ptr& first, Call call) {
  while (!entries.empty()) {
    for (auto& entry : std::exchange(entries, {})) {
      try {
        call(entry);
      } catch (...) {
        if (!first)
          first = std::current_exception();
      }
    }
  }
}

/// Runs `body(first)`, then rethrows the first exception it kept in `first`.
template <class Body>
void answering_all(Body body) {
  std::exception_ptr first;
  body(first);
  if (first)
    std::rethrow_exception(first);
}

}  // namespace

void waiting_requests::stash(std::function<void()> run, fail_fn fail) {
  stash_.push_back({std::move(run), std::move(fail)});
}

void waiting_requests::await_restart(std::function<void(std::uint64_t)> started, fail_fn fail) {
  restarts_.push_back({std::move(started), std::move(fail)});
}

void waiting_requests::incarnation_started(std::uint64_t generation) {
  answering_all([&](std::exception_ptr& first) {
    drain(stash_, first, [](stashed_request& s) { s.run(); });
    drain(restarts_, first, [generation](restart_waiter& w) { w.started(generation); });
  });
}

void waiting_requests::fail_waiting(const caf::error& err) {
  answering_all([&](std::exception_ptr& first) { fail_waiting(err, first); });
}

void waiting_requests::fail_waiting(const caf::error& err, std::exception_ptr& first) {
  drain(stash_, first, [&err](stashed_request& s) { s.fail(err); });
  drain(restarts_, first, [&err](restart_waiter& w) { w.fail(err); });
}

waiting_requests::in_flight_id waiting_requests::forwarded(fail_fn fail) {
  const auto id = ++next_id_;
  in_flight_.emplace(id, std::move(fail));
  return id;
}

bool waiting_requests::answered(in_flight_id id) noexcept {
  return in_flight_.erase(id) != 0;
}

void waiting_requests::fail_in_flight(const caf::error& err) {
  answering_all([&](std::exception_ptr& first) { fail_in_flight(err, first); });
}

void waiting_requests::fail_in_flight(const caf::error& err, std::exception_ptr& first) {
  drain(in_flight_, first, [&err](auto& entry) { entry.second(err); });
}

void waiting_requests::fail_all(const caf::error& err) {
  answering_all([&](std::exception_ptr& first) {
    // Until nothing is left: a fail function of one kind may have added an entry of another.
    while (!empty()) {
      fail_waiting(err, first);
      fail_in_flight(err, first);
    }
  });
}

}  // namespace uma::detail
