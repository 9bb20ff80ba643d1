#pragma once

// One uma::asio operation's shared state (cancellation, completion on the handler's executor)
// and its CAF-side reply sink. Installed because actors/asio_bridge.hpp's templates need it
// inline; users include asio_bridge.hpp, not this.

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>
#include <caf/error.hpp>

#include <uma/actors/asio_error.hpp>
#include <uma/messages/error_category.hpp>

namespace uma::asio::detail {

using boost::asio::cancellation_type;

/// Cancellation types an operation honours. Read-only requests leave nothing behind (total);
/// a cancelled allocation is released once its reply arrives, so the allocator is left in a
/// known state (partial); prefetch, discard and advice may still take effect (terminal only).
inline constexpr cancellation_type read_only_cancellation =
    cancellation_type::terminal | cancellation_type::partial | cancellation_type::total;
inline constexpr cancellation_type allocate_cancellation =
    cancellation_type::terminal | cancellation_type::partial;
inline constexpr cancellation_type mutating_cancellation = cancellation_type::terminal;

/// One operation's shared state. Two events end it: its reply (always arrives, possibly as an
/// error) and, perhaps, a cancellation. `finished_` decides which one completes the handler;
/// `outstanding_` counts the reply and the completion so that the bridge's executor keeps work
/// until both have happened.
template <class Handler, class Value>
class operation : public std::enable_shared_from_this<operation<Handler, Value>> {
 public:
  using handler_executor =
      boost::asio::associated_executor_t<Handler, boost::asio::any_io_executor>;

  operation(Handler handler, const boost::asio::any_io_executor& io, error_detail* detail)
      : handler_(std::move(handler)),
        io_executor_(io),
        handler_executor_(boost::asio::get_associated_executor(*handler_, io)),
        io_work_(io_executor_),
        handler_work_(handler_executor_),
        detail_(detail) {}

  /// Installs the cancellation handler on the handler's slot, if it has a connected one.
  void arm(cancellation_type honoured) {
    slot_ = boost::asio::get_associated_cancellation_slot(*handler_);
    if (slot_.is_connected())
      slot_.template emplace<canceller>(this->weak_from_this(), honoured);
  }

  /// From the CAF side: hands the reply over to the handler's executor (via the bridge's). The
  /// caller's reference moves into the posted function, so that the operation (with its
  /// handler and executors) is destroyed on the Asio side, never later on a CAF thread.
  static void post_reply(std::shared_ptr<operation> self, boost::system::error_code ec, Value value,
                         std::string message) {
    const auto io = self->io_executor_;
    const auto to = self->handler_executor_;
    boost::asio::post(
        io, boost::asio::bind_executor(to, [self = std::move(self), ec, value = std::move(value),
                                            message = std::move(message)]() mutable {
          self->on_reply(ec, std::move(value), std::move(message));
        }));
  }

 private:
  struct canceller {
    // A constructor, not an aggregate: the slot's emplace constructs it with parentheses, which
    // clang before 16 does not accept for aggregates.
    canceller(std::weak_ptr<operation> o, cancellation_type h) : op(std::move(o)), honoured(h) {}

    std::weak_ptr<operation> op;
    cancellation_type honoured;

    void operator()(cancellation_type type) const {
      if ((type & honoured) == cancellation_type::none)
        return;
      if (auto self = op.lock())
        self->cancel();
    }
  };

  // On the emitting thread: decide now (so that a reply already on its way loses), complete
  // later on the handler's executor, never inline in `emit`.
  void cancel() {
    if (finished_.exchange(true, std::memory_order_acq_rel))
      return;
    boost::asio::post(
        io_executor_,
        boost::asio::bind_executor(handler_executor_, [self = this->shared_from_this()] {
          self->complete(boost::asio::error::operation_aborted, Value{},
                         "operation cancelled through its cancellation slot");
        }));
  }

  // On the handler's executor.
  void on_reply(boost::system::error_code ec, Value value, std::string message) {
    if (!finished_.exchange(true, std::memory_order_acq_rel)) {
      complete(ec, std::move(value), std::move(message));
    } else {
      // Cancelled first: drop what the reply carries here, before giving up the work, so that
      // a late ref's region is released before `run()` can return.
      [[maybe_unused]] Value dropped = std::move(value);
    }
    settle();
  }

  // On the handler's executor, exactly once (whoever set `finished_`).
  void complete(boost::system::error_code ec, Value value, std::string message) {
    if (slot_.is_connected())
      slot_.clear();
    if (detail_ != nullptr) {
      detail_->code = ec;
      detail_->message = std::move(message);
    }
    Handler handler = std::move(*handler_);
    handler_.reset();
    handler_work_.reset();
    std::move(handler)(ec, std::move(value));
    settle();
  }

  void settle() {
    if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) == 1)
      io_work_.reset();
  }

  std::optional<Handler> handler_;
  const boost::asio::any_io_executor io_executor_;
  const handler_executor handler_executor_;
  boost::asio::executor_work_guard<boost::asio::any_io_executor> io_work_;
  boost::asio::executor_work_guard<handler_executor> handler_work_;
  boost::asio::cancellation_slot slot_{};
  error_detail* detail_;
  std::atomic<bool> finished_{false};
  std::atomic<int> outstanding_{2};  // the reply, the completion
};

/// The CAF side of one operation: turns the reply (or error) into the operation's value and
/// posts it, exactly once. Should the request actor end without calling either handler, the
/// destructor reports that, so the handler still completes.
template <class Operation, class Reply, class Value, class Transform>
class reply_sink {
 public:
  reply_sink(std::shared_ptr<Operation> op, Transform transform)
      : op_(std::move(op)), transform_(std::move(transform)) {}
  reply_sink(const reply_sink&) = delete;
  reply_sink& operator=(const reply_sink&) = delete;
  ~reply_sink() {
    if (op_)
      fail(errc::allocator_stopped, "the request actor ended without a reply");
  }

  // Takes the reply out of CAF's message and lets every temporary share go before posting, so
  // that the handler's side holds the only share of a ref: dropping it there releases the region.
  void value(Reply& reply) {
    if (!op_)
      return;
    std::optional<Value> result;
    try {
      result.emplace(transform_(Reply(std::move(reply))));
    } catch (const error& e) {
      fail(e.code(), e.what());
      return;
    }
    Operation::post_reply(std::move(op_), {}, std::move(*result), {});
  }

  void failure(const caf::error& e) {
    const auto err = to_uma_error(e);
    fail(err.code(), err.what());
  }

 private:
  void fail(errc code, std::string message) {
    if (op_)
      Operation::post_reply(std::move(op_), make_error_code(code), Value{}, std::move(message));
  }

  std::shared_ptr<Operation> op_;
  Transform transform_;
};

}  // namespace uma::asio::detail
