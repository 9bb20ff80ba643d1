#pragma once

// Boost.Asio front end of the allocator: asynchronous operations with completion tokens
// (callbacks, use_future, use_awaitable, deferred, ...) for code that lives on Asio executors.
//
// Threading: each operation spawns one short-lived CAF event-based actor that sends the request
// and waits for the reply with `request(...).then(...)`, so no Asio thread ever blocks. The reply
// is posted to the bridge's executor and dispatched to the handler's associated executor: the
// handler never runs on a CAF worker thread, nor inside the initiating call.
//
// Cancellation: through the handler's associated cancellation slot. The first of (reply,
// cancellation) decides the outcome, with one atomic exchange; a cancelled operation completes
// with `boost::asio::error::operation_aborted` at once, and whatever its reply carries later (a
// ref to a fresh region) is dropped on the handler's executor, which gives the region back.
// The operation keeps work on the bridge's executor until that late reply has arrived, so
// `io_context::run()` returns only once nothing is left in flight.

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/system/error_code.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>

#include <uma/actors/asio_error.hpp>
#include <uma/actors/asio_operation.hpp>
#include <uma/actors/client.hpp>
#include <uma/messages/interface.hpp>

namespace uma::asio {

/// A completion token of a uma::asio operation together with where to put its `error_detail`.
/// Only uma::asio operations accept it; it is not a general Asio token adapter.
template <class Token>
struct detailed_token {
  Token token;           ///< the token that decides how the operation completes
  error_detail* detail;  ///< written before the handler runs; must outlive the operation
};

/// Wraps `token` so that the operation also fills `detail` (which must outlive the operation),
/// in the spirit of `boost::asio::redirect_error`. Bind executors and cancellation slots to the
/// inner token: `with_detail(bind_executor(strand, callback), detail)`.
template <class Token>
[[nodiscard]] detailed_token<std::decay_t<Token>> with_detail(Token&& token, error_detail& detail) {
  return {std::forward<Token>(token), &detail};
}

/// Sends allocator requests from Asio code. A small value (actor system, allocator handle,
/// executor, timeout) that is cheap to copy; operations copy what they need at initiation, so a
/// bridge may go away while its operations are in flight.
///
/// Lifetimes: each operation keeps work on the bridge's executor until its reply has arrived
/// (even when it was cancelled), so `io_context::run()` returns only once nothing is in flight.
/// Replies are posted into the execution context from CAF threads, so the context must outlive
/// the actor system: declare the `io_context` before the `caf::actor_system` (the system's
/// destructor waits for the request actors, the last code that touches the context).
class bridge {
 public:
  /// The executor a handler without an associated executor completes on.
  using executor_type = boost::asio::any_io_executor;

  /// Talks to `allocator` (an allocator or the `managed_allocator_actor` view of a supervisor);
  /// handlers without an associated executor complete on `executor`.
  bridge(caf::actor_system& sys, managed_allocator_actor allocator, executor_type executor)
      : sys_(&sys), allocator_(std::move(allocator)), executor_(std::move(executor)) {}

  /// The same, completing on `context`'s executor (an `io_context`, a `thread_pool`).
  template <std::derived_from<boost::asio::execution_context> ExecutionContext>
  bridge(caf::actor_system& sys, managed_allocator_actor allocator, ExecutionContext& context)
      : bridge(sys, std::move(allocator), executor_type(context.get_executor())) {}

  /// The default completion executor.
  [[nodiscard]] const executor_type& get_executor() const noexcept { return executor_; }
  /// The allocator requests go to.
  [[nodiscard]] const managed_allocator_actor& handle() const noexcept { return allocator_; }
  /// The actor system that runs the request actors.
  [[nodiscard]] caf::actor_system& system() const noexcept { return *sys_; }
  /// How long each request waits for its reply (default 60 s); past it the operation completes
  /// with `errc::timeout`.
  void set_timeout(std::chrono::milliseconds timeout) noexcept { timeout_ = timeout; }
  /// The request timeout.
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }

 private:
  caf::actor_system* sys_;
  managed_allocator_actor allocator_;
  executor_type executor_;
  std::chrono::milliseconds timeout_{60000};
};

namespace detail {

/// Replies that are the operation's value as they are.
struct as_is {
  template <class T>
  T operator()(T&& x) const {
    return std::forward<T>(x);
  }
};

/// The untyped ref an allocation replies, seen as elements of T.
template <class T>
struct typed_ref {
  ManagedRef<T> operator()(byte_ref ref) const { return ref.template as<T>(); }
};

/// What `async_initiate` calls: builds the operation and spawns the actor that sends `msg`.
template <class Value, class Reply, class Transform>
struct initiation {
  caf::actor_system* sys;
  managed_allocator_actor allocator;
  boost::asio::any_io_executor executor;
  std::chrono::milliseconds timeout;
  error_detail* detail;
  cancellation_type honoured;
  Transform transform;

  using executor_type = boost::asio::any_io_executor;
  [[nodiscard]] executor_type get_executor() const noexcept { return executor; }

  template <class Handler, class... Message>
  void operator()(Handler&& handler, Message&&... msg) const {
    using op_type = operation<std::decay_t<Handler>, Value>;
    using sink_type = reply_sink<op_type, Reply, Value, Transform>;
    auto op = std::make_shared<op_type>(std::forward<Handler>(handler), executor, detail);
    op->arm(honoured);
    // The sink goes in as a spawn argument rather than a capture: CAF 0.17 dereferences a null
    // argument tuple when a function-based actor takes none (UBSan flags it).
    sys->spawn(
        [hdl = allocator, timeout = timeout,
         ... msg = std::decay_t<Message>(std::forward<Message>(msg))](
            caf::event_based_actor* self, std::shared_ptr<sink_type> sink) mutable {
          self->request(hdl, timeout, std::move(msg)...)
              .then([sink](Reply& reply) { sink->value(reply); },
                    [sink](caf::error& e) { sink->failure(e); });
        },
        std::make_shared<sink_type>(std::move(op), transform));
  }
};

template <class Token>
struct is_detailed : std::false_type {};
template <class Token>
struct is_detailed<detailed_token<Token>> : std::true_type {};

/// Starts an operation whose request replies `Reply` and whose handler gets `Value`.
template <class Value, class Reply, class Transform, class Token, class... Message>
auto start(const bridge& b, cancellation_type honoured, Transform transform, Token&& token,
           Message&&... msg) {
  using signature = void(boost::system::error_code, Value);
  using init = initiation<Value, Reply, Transform>;
  if constexpr (is_detailed<std::decay_t<Token>>::value) {
    using inner = decltype(token.token);
    return boost::asio::async_initiate<inner, signature>(
        init{&b.system(), b.handle(), b.get_executor(), b.timeout(), token.detail, honoured,
             std::move(transform)},
        token.token, std::forward<Message>(msg)...);
  } else {
    return boost::asio::async_initiate<Token, signature>(
        init{&b.system(), b.handle(), b.get_executor(), b.timeout(), nullptr, honoured,
             std::move(transform)},
        token, std::forward<Message>(msg)...);
  }
}

}  // namespace detail

/// Allocates `count` elements of T. Completes with `void(error_code, ManagedRef<T>)`: the ref,
/// or an empty ref and a "uma" code (overflow, invalid_argument for a zero size or a bad
/// alignment, quota_exceeded, out_of_memory, ...). Cancellation (terminal, partial): completes
/// with operation_aborted; the region allocated meanwhile is released when its reply arrives.
template <class T, class Token>
auto async_allocate(const bridge& b, std::size_t count, allocate_options options, Token&& token) {
  allocate_request request{count,          sizeof(T),      std::max(options.alignment, alignof(T)),
                           options.attach, options.stream, std::move(options.label)};
  return detail::start<ManagedRef<T>, byte_ref>(b, detail::allocate_cancellation,
                                                detail::typed_ref<T>{}, std::forward<Token>(token),
                                                allocate_atom_v, std::move(request));
}

/// Allocates `count` elements of T with default options; as above. Prefer this form (or a named
/// options object) inside `co_await`: g++ 12 mis-destroys a temporary with a non-trivial
/// destructor (such as `allocate_options{}` with its label) that is an argument within a
/// co_await expression; its free then aborts.
template <class T, class Token>
auto async_allocate(const bridge& b, std::size_t count, Token&& token) {
  return async_allocate<T>(b, count, allocate_options{}, std::forward<Token>(token));
}

/// Prefetches `request.refs` to `request.locations` (one broadcast, or one per ref). Completes
/// with `void(error_code, op_result)`. Cancellation (terminal only): the handler completes with
/// operation_aborted, but the prefetch may still happen.
template <class Token>
auto async_prefetch(const bridge& b, prefetch_request request, Token&& token) {
  return detail::start<op_result, op_result>(b, detail::mutating_cancellation, detail::as_is{},
                                             std::forward<Token>(token), prefetch_atom_v,
                                             std::move(request));
}

/// Prefetches one ref to `where`; as above.
template <class T, class Token>
auto async_prefetch(const bridge& b, const ManagedRef<T>& ref, location where, Token&& token) {
  return async_prefetch(b, prefetch_request{{client::erase(ref)}, {where}},
                        std::forward<Token>(token));
}

/// Discards the contents of `request.refs`. Completes with `void(error_code, op_result)`.
/// Cancellation (terminal only): as prefetch.
template <class Token>
auto async_discard(const bridge& b, discard_request request, Token&& token) {
  return detail::start<op_result, op_result>(b, detail::mutating_cancellation, detail::as_is{},
                                             std::forward<Token>(token), discard_atom_v,
                                             std::move(request));
}

/// Discards the contents of one ref; as above.
template <class T, class Token>
auto async_discard(const bridge& b, const ManagedRef<T>& ref, Token&& token) {
  return async_discard(b, discard_request{{client::erase(ref)}}, std::forward<Token>(token));
}

/// Applies `request.what` (with `request.where`) to every ref. Completes with
/// `void(error_code, op_result)`; invalid_argument when the location is not allowed for the
/// advice. Cancellation (terminal only): as prefetch.
template <class Token>
auto async_advise(const bridge& b, advise_request request, Token&& token) {
  return detail::start<op_result, op_result>(b, detail::mutating_cancellation, detail::as_is{},
                                             std::forward<Token>(token), advise_atom_v,
                                             std::move(request));
}

/// Applies advice to one ref (`where` matters for preferred location and accessed-by only).
template <class T, class Token>
auto async_advise(const bridge& b, const ManagedRef<T>& ref, advice what, location where,
                  Token&& token) {
  return async_advise(b, advise_request{{client::erase(ref)}, what, where},
                      std::forward<Token>(token));
}

/// Reads the advice and last prefetch location of a ref's range. Completes with
/// `void(error_code, range_attributes)`. Cancellation: any type.
template <class T, class Token>
auto async_attributes(const bridge& b, const ManagedRef<T>& ref, Token&& token) {
  return detail::start<range_attributes, range_attributes>(
      b, detail::read_only_cancellation, detail::as_is{}, std::forward<Token>(token),
      attributes_atom_v, client::erase(ref));
}

/// The allocator's counters. Completes with `void(error_code, allocator_stats)`.
/// Cancellation: any type.
template <class Token>
auto async_stats(const bridge& b, Token&& token) {
  return detail::start<allocator_stats, allocator_stats>(
      b, detail::read_only_cancellation, detail::as_is{}, std::forward<Token>(token), stats_atom_v);
}

/// The counters once every backend call queued before it (frees included) has run. Completes
/// with `void(error_code, allocator_stats)`. Cancellation: any type.
template <class Token>
auto async_flush(const bridge& b, Token&& token) {
  return detail::start<allocator_stats, allocator_stats>(
      b, detail::read_only_cancellation, detail::as_is{}, std::forward<Token>(token), flush_atom_v);
}

}  // namespace uma::asio
