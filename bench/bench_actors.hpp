#pragma once

// The benchmark's clients of the allocator: event-based CAF actors, so that what is measured is
// what an actor client pays (request(...).then(...), no blocking), plus two one-shot helpers.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/stateful_actor.hpp>

#include <uma/messages/interface.hpp>

namespace uma::bench {

using bench_clock = std::chrono::steady_clock;

[[nodiscard]] inline double ns_between(bench_clock::time_point a, bench_clock::time_point b) {
  return std::chrono::duration<double, std::nano>(b - a).count();
}

/// When a chain stops issuing requests.
struct chain_limits {
  std::size_t warmup = 0;   ///< untimed requests first
  std::size_t samples = 0;  ///< timed requests; 0: until `stop`
  double time_limit_s = 0;  ///< > 0: stop early once past it (with at least 10 samples)
  const std::atomic<bool>* stop = nullptr;
  bool keep_samples = true;  ///< false: only count (throughput)
  bool record_sent = false;  ///< keep each timed request's send time
};

/// What a chain measured.
struct chain_result {
  std::vector<double> ns;                     ///< request -> reply handled (reply dropped), ns
  std::vector<bench_clock::time_point> sent;  ///< when each timed request was sent
  std::uint64_t completed = 0;                ///< replies, warm-up included
  caf::error error{};
};

namespace detail {

template <class Reply, class... Ts>
struct chain_state {
  managed_allocator_actor target;
  std::tuple<Ts...> args;
  chain_limits limits;
  std::shared_ptr<chain_result> out;
  std::size_t issued = 0;
  bench_clock::time_point start;
  bench_clock::time_point t0;
};

template <class Reply, class... Ts>
using chain_actor_ptr = caf::stateful_actor<chain_state<Reply, Ts...>>*;

/// Sends the next request, unless a limit says the chain is done; an actor with no request
/// in flight and no behaviour terminates, which is how the chain ends.
template <class Reply, class... Ts>
void chain_issue(chain_actor_ptr<Reply, Ts...> self) {
  auto& st = self->state;
  const auto& lim = st.limits;
  if (lim.samples != 0 && st.issued >= lim.warmup + lim.samples)
    return;
  if (lim.stop != nullptr && lim.stop->load(std::memory_order_relaxed))
    return;
  if (lim.time_limit_s > 0 && st.issued > lim.warmup + 10 &&
      ns_between(st.start, bench_clock::now()) > lim.time_limit_s * 1e9)
    return;
  ++st.issued;
  st.t0 = bench_clock::now();
  std::apply(
      [self](const auto&... xs) { return self->request(self->state.target, caf::infinite, xs...); },
      st.args)
      .then(
          [self](Reply& reply) {
            // A ref is released inside the timed interval: moved out of the message, dropped.
            static_cast<void>(Reply{std::move(reply)});
            const auto t1 = bench_clock::now();
            auto& st = self->state;
            ++st.out->completed;
            if (st.issued > st.limits.warmup) {
              if (st.limits.keep_samples)
                st.out->ns.push_back(ns_between(st.t0, t1));
              if (st.limits.record_sent)
                st.out->sent.push_back(st.t0);
            }
            chain_issue(self);
          },
          [self](caf::error& e) { self->state.out->error = std::move(e); });
}

template <class Reply, class... Ts>
void chain_actor(chain_actor_ptr<Reply, Ts...> self, managed_allocator_actor target,
                 std::tuple<Ts...> args, chain_limits limits, std::shared_ptr<chain_result> out) {
  auto& st = self->state;
  st.target = std::move(target);
  st.args = std::move(args);
  st.limits = limits;
  st.out = std::move(out);
  if (st.limits.keep_samples && st.limits.samples != 0)
    st.out->ns.reserve(st.limits.samples);
  st.start = bench_clock::now();
  chain_issue(self);
}

}  // namespace detail

/// Spawns an actor that sends `args...` to `target`, waits for the reply, drops it, records the
/// round trip and sends the next, until `limits` say stop. Returns at once; `out` fills in.
template <class Reply, class... Ts>
[[nodiscard]] caf::actor spawn_chain(caf::actor_system& sys, const managed_allocator_actor& target,
                                     chain_limits limits, std::shared_ptr<chain_result> out,
                                     Ts... args) {
  return sys.spawn(&detail::chain_actor<Reply, Ts...>, target, std::make_tuple(std::move(args)...),
                   limits, std::move(out));
}

/// Waits until every actor in `actors` has terminated.
template <class Actors>
void wait_all(caf::actor_system& sys, const Actors& actors) {
  caf::scoped_actor self{sys};
  self->wait_for(actors);
}

/// A chain run to its end.
template <class Reply, class... Ts>
[[nodiscard]] std::shared_ptr<chain_result> run_chain(caf::actor_system& sys,
                                                      const managed_allocator_actor& target,
                                                      chain_limits limits, Ts... args) {
  auto out = std::make_shared<chain_result>();
  std::vector<caf::actor> one{spawn_chain<Reply>(sys, target, limits, out, std::move(args)...)};
  wait_all(sys, one);
  return out;
}

/// What a burst of requests did.
struct burst_result {
  std::uint64_t replies = 0;
  bench_clock::time_point last_reply{};
  caf::error error{};
};

namespace detail {

template <class Reply>
struct burst_state {
  std::shared_ptr<burst_result> out;
};

template <class Reply, class Request>
void burst_actor(caf::stateful_actor<burst_state<Reply>>* self, managed_allocator_actor target,
                 std::vector<Request> requests, std::shared_ptr<burst_result> out) {
  self->state.out = std::move(out);
  for (auto& r : requests)
    std::apply([&](auto&... xs) { return self->request(target, caf::infinite, std::move(xs)...); },
               r)
        .then(
            [self](Reply&) {
              ++self->state.out->replies;
              self->state.out->last_reply = bench_clock::now();
            },
            [self](caf::error& e) { self->state.out->error = std::move(e); });
}

template <class Reply>
struct fill_state {
  managed_allocator_actor target;
  allocate_request request;
  std::shared_ptr<std::vector<byte_ref>> refs;
  std::shared_ptr<caf::error> error;
  std::size_t next = 0;
  std::size_t in_flight = 0;
  std::size_t window = 0;
};

inline void fill_issue(caf::stateful_actor<fill_state<byte_ref>>* self) {
  auto& st = self->state;
  while (st.in_flight < st.window && st.next < st.refs->size() && !*st.error) {
    const auto i = st.next++;
    ++st.in_flight;
    self->request(st.target, caf::infinite, allocate_atom_v, st.request)
        .then(
            [self, i](byte_ref& ref) {
              (*self->state.refs)[i] = std::move(ref);
              --self->state.in_flight;
              fill_issue(self);
            },
            [self](caf::error& e) { *self->state.error = std::move(e); });
  }
}

inline void fill_actor(caf::stateful_actor<fill_state<byte_ref>>* self,
                       managed_allocator_actor target, allocate_request request,
                       std::shared_ptr<std::vector<byte_ref>> refs,
                       std::shared_ptr<caf::error> error, std::size_t window) {
  auto& st = self->state;
  st.target = std::move(target);
  st.request = std::move(request);
  st.refs = std::move(refs);
  st.error = std::move(error);
  st.window = window;
  fill_issue(self);
}

}  // namespace detail

/// Sends every request of `requests` at once (one message each) and waits for all replies.
template <class Reply, class Request>
[[nodiscard]] burst_result run_burst(caf::actor_system& sys, const managed_allocator_actor& target,
                                     std::vector<Request> requests) {
  auto out = std::make_shared<burst_result>();
  std::vector<caf::actor> one{
      sys.spawn(&detail::burst_actor<Reply, Request>, target, std::move(requests), out)};
  wait_all(sys, one);
  return *out;
}

/// `count` allocations of `request`, `window` requests in flight at a time, from an actor.
/// Throws nothing: a failure is returned (the refs allocated so far are in `refs`).
[[nodiscard]] inline caf::error allocate_many(caf::actor_system& sys,
                                              const managed_allocator_actor& target,
                                              const allocate_request& request, std::size_t count,
                                              std::vector<byte_ref>& refs,
                                              std::size_t window = 64) {
  auto slots = std::make_shared<std::vector<byte_ref>>(count);
  auto error = std::make_shared<caf::error>();
  std::vector<caf::actor> one{
      sys.spawn(&detail::fill_actor, target, request, slots, error, window)};
  wait_all(sys, one);
  refs = std::move(*slots);
  return *error;
}

}  // namespace uma::bench
