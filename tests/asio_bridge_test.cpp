#include <uma/actors/asio_bridge.hpp>

#include <gtest/gtest.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <numeric>
#include <optional>
#include <thread>

#include "support/actor_fixture.hpp"

namespace uma {
namespace {

using boost::system::error_code;
namespace net = boost::asio;

/// The value type of a deferred uma::asio operation, `V` of `void(error_code, V)`.
template <class Deferred>
struct value_of;
template <class V, class... Rest>
struct value_of<net::deferred_async_operation<void(error_code, V), Rest...>> {
  using type = V;
};

/// Holds the io_context in a base that comes before the actor fixture, so that it is destroyed
/// after the actor system: CAF threads post replies into it until the system has shut down.
struct io_context_holder {
  net::io_context io_;
};

/// The actor fixture plus an io_context and a bridge to the fixture's allocator. Every test runs
/// the io_context until it runs out of work: operations keep work on it until their reply has
/// arrived, so nothing is in flight when a test ends.
class asio_bridge : protected io_context_holder, public test::actor_fixture {
 protected:
  /// Runs a deferred uma::asio operation to completion on the io_context and returns what its
  /// handler received.
  template <class Deferred>
  std::pair<error_code, typename value_of<Deferred>::type> finish(Deferred op) {
    std::optional<std::pair<error_code, typename value_of<Deferred>::type>> out;
    std::move(op)([&](error_code ec, auto value) { out.emplace(ec, std::move(value)); });
    io_.restart();
    io_.run();
    return std::move(out).value();
  }

  asio::bridge bridge_{sys_, uma_->handle(), io_};
};

// --- completion tokens ---------------------------------------------------------------------

TEST_F(asio_bridge, CallbackTokenReceivesATypedRef) {
  error_code ec = errc::backend_error;
  ManagedRef<float> ref;
  asio::async_allocate<float>(bridge_, 1000, {.label = "asio"},
                              [&](error_code e, ManagedRef<float> r) {
                                ec = e;
                                ref = std::move(r);
                              });
  io_.run();
  EXPECT_FALSE(ec) << ec.message();
  ASSERT_TRUE(ref.valid());
  EXPECT_EQ(ref.size(), 1000u);
  EXPECT_EQ(uma_->regions().at(0).label, "asio");
}

TEST_F(asio_bridge, UseFutureTokenDeliversTheRefToAnotherThread) {
  auto future = asio::async_allocate<double>(bridge_, 64, {}, net::use_future);
  std::thread runner([this] { io_.run(); });
  const auto ref = future.get();
  runner.join();
  EXPECT_TRUE(ref.valid());
  EXPECT_EQ(ref.bytes(), 512u);
}

TEST_F(asio_bridge, UseAwaitableTokenWorksInsideACoroutine) {
  std::optional<float> first;
  std::optional<std::size_t> size;
  std::exception_ptr failure;
  net::co_spawn(
      io_,
      [&]() -> net::awaitable<void> {
        auto ref = co_await asio::async_allocate<float>(bridge_, 256, net::use_awaitable);
        {
          auto pin = ref.pin();
          std::iota(pin.begin(), pin.end(), 7.0f);
        }
        size = ref.size();
        first = ref.pin()[0];
      },
      [&](std::exception_ptr e) { failure = e; });
  io_.run();
  ASSERT_FALSE(failure);
  EXPECT_EQ(size, 256u);
  EXPECT_EQ(first, 7.0f);
}

TEST_F(asio_bridge, DeferredTokenRunsWhenLaunched) {
  auto op = asio::async_stats(bridge_, net::deferred);
  std::optional<allocator_stats> stats;
  std::move(op)([&](error_code ec, allocator_stats s) {
    EXPECT_FALSE(ec);
    stats = std::move(s);
  });
  io_.run();
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->backend, "host");
}

// --- where handlers run --------------------------------------------------------------------

TEST_F(asio_bridge, CompletionRunsOnTheThreadRunningTheIoContextNotOnACafWorker) {
  std::optional<std::thread::id> ran_on;
  asio::async_stats(bridge_,
                    [&](error_code, allocator_stats) { ran_on = std::this_thread::get_id(); });
  io_.run();
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST_F(asio_bridge, CompletionRunsInsideTheHandlersStrand) {
  auto strand = net::make_strand(io_);
  std::optional<bool> in_strand;
  asio::async_stats(bridge_, net::bind_executor(strand, [&](error_code, allocator_stats) {
                      in_strand = strand.running_in_this_thread();
                    }));
  io_.run();
  EXPECT_EQ(in_strand, true);
}

TEST_F(asio_bridge, AwaitableCompletionResumesOnTheCoroutinesStrand) {
  auto strand = net::make_strand(io_);
  std::optional<bool> in_strand;
  net::co_spawn(
      strand,
      [&]() -> net::awaitable<void> {
        co_await asio::async_stats(bridge_, net::use_awaitable);
        in_strand = strand.running_in_this_thread();
      },
      net::detached);
  io_.run();
  EXPECT_EQ(in_strand, true);
}

// --- errors ----------------------------------------------------------------------------------

TEST_F(asio_bridge, ErrorsAreCodesOfTheUmaCategory) {
  const auto [ec, ref] = finish(asio::async_allocate<float>(bridge_, 0, {}, net::deferred));
  EXPECT_STREQ(ec.category().name(), "uma");
  EXPECT_EQ(ec.value(), static_cast<int>(errc::invalid_argument));
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_NE(ec.message().find("invalid_argument"), std::string::npos) << ec.message();
  EXPECT_TRUE(ref.empty());
}

TEST_F(asio_bridge, WithDetailCarriesTheAllocatorsMessage) {
  asio::error_detail detail;
  const auto [ec, ref] =
      finish(asio::async_allocate<float>(bridge_, 0, {}, asio::with_detail(net::deferred, detail)));
  EXPECT_EQ(detail.code, ec);
  EXPECT_NE(detail.message.find("zero-size request"), std::string::npos) << detail.message;
}

TEST_F(asio_bridge, WithDetailIsClearedOnSuccess) {
  asio::error_detail detail{errc::backend_error, "stale"};
  const auto [ec, stats] =
      finish(asio::async_stats(bridge_, asio::with_detail(net::deferred, detail)));
  EXPECT_FALSE(ec);
  EXPECT_FALSE(detail.code);
  EXPECT_TRUE(detail.message.empty());
}

TEST_F(asio_bridge, AwaitableErrorsThrowSystemErrorWithTheUmaCode) {
  std::optional<error_code> thrown;
  net::co_spawn(
      io_,
      [&]() -> net::awaitable<void> {
        try {
          co_await asio::async_allocate<float>(bridge_, 0, net::use_awaitable);
        } catch (const boost::system::system_error& e) {
          thrown = e.code();
        }
      },
      net::detached);
  io_.run();
  EXPECT_EQ(thrown, error_code(errc::invalid_argument));
}

TEST_F(asio_bridge, AStoppedAllocatorMapsToAllocatorStopped) {
  uma_->stop();
  const auto [ec, stats] = finish(asio::async_stats(bridge_, net::deferred));
  EXPECT_EQ(ec, errc::allocator_stopped);
}

TEST_F(asio_bridge, TheCategoryNamesEveryCode) {
  EXPECT_EQ(asio::category().message(static_cast<int>(errc::quota_exceeded)), "quota_exceeded");
  EXPECT_EQ(asio::category().message(static_cast<int>(errc::overflow)), "overflow");
  EXPECT_NE(asio::category().message(250).find("unknown"), std::string::npos);
}

// --- cancellation ----------------------------------------------------------------------------

// The signal is emitted before the io_context runs, so the cancellation always wins: the reply
// can only be looked at on the io_context's thread.
TEST_F(asio_bridge, CancelledAllocateCompletesWithOperationAborted) {
  net::cancellation_signal cancel;
  int calls = 0;
  error_code ec;
  ManagedRef<float> ref;
  asio::async_allocate<float>(
      bridge_, 1024, {},
      net::bind_cancellation_slot(cancel.slot(), [&](error_code e, ManagedRef<float> r) {
        ++calls;
        ec = e;
        ref = std::move(r);
      }));
  cancel.emit(net::cancellation_type::terminal);
  io_.run();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ec, net::error::operation_aborted);
  EXPECT_TRUE(ref.empty());
}

TEST_F(asio_bridge, CancelledAllocateReleasesTheRegionItsLateReplyCarries) {
  net::cancellation_signal cancel;
  asio::async_allocate<float>(bridge_, 1024, {},
                              net::bind_cancellation_slot(cancel.slot(), [](error_code, auto) {}));
  cancel.emit(net::cancellation_type::terminal);
  io_.run();  // returns once the late reply has arrived and its ref was dropped
  const auto s = uma_->flush();
  EXPECT_EQ(s.allocations, 1u);
  EXPECT_EQ(s.releases, 1u);
  EXPECT_EQ(s.live_regions, 0u);
  EXPECT_EQ(backend_->counters().frees, 1u);
}

TEST_F(asio_bridge, CancellationAfterCompletionChangesNothing) {
  net::cancellation_signal cancel;
  int calls = 0;
  error_code ec;
  asio::async_stats(bridge_,
                    net::bind_cancellation_slot(cancel.slot(), [&](error_code e, allocator_stats) {
                      ++calls;
                      ec = e;
                    }));
  io_.run();
  cancel.emit(net::cancellation_type::terminal);
  io_.restart();
  io_.run();
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(ec);
}

TEST_F(asio_bridge, PrefetchIgnoresCancellationWeakerThanTerminal) {
  auto ref = uma_->allocate<float>(1024);
  net::cancellation_signal cancel;
  error_code ec = errc::backend_error;
  asio::async_prefetch(
      bridge_, ref, location::host(),
      net::bind_cancellation_slot(cancel.slot(), [&](error_code e, op_result) { ec = e; }));
  cancel.emit(net::cancellation_type::total);
  io_.run();
  EXPECT_FALSE(ec) << ec.message();
}

// `a || b` cancels the loser. The post is queued before the allocation is even sent, and the
// io_context runs its queue in order, so the post always wins.
TEST_F(asio_bridge, AnAllocationLosingAnAwaitableRaceIsCancelledAndReleased) {
  using namespace net::experimental::awaitable_operators;
  std::optional<std::size_t> winner;
  net::co_spawn(
      io_,
      [&]() -> net::awaitable<void> {
        auto result = co_await (net::post(io_, net::use_awaitable) ||
                                asio::async_allocate<float>(bridge_, 64, net::use_awaitable));
        winner = result.index();
      },
      net::detached);
  io_.run();
  EXPECT_EQ(winner, 0u);
  const auto s = uma_->flush();
  EXPECT_EQ(s.allocations, 1u);
  EXPECT_EQ(s.live_regions, 0u);
}

// --- the other requests --------------------------------------------------------------------

TEST_F(asio_bridge, AsyncStatsReportsTheAllocatorsCounters) {
  auto a = uma_->allocate<float>(10);
  auto b = uma_->allocate<float>(20);
  const auto [ec, stats] = finish(asio::async_stats(bridge_, net::deferred));
  EXPECT_FALSE(ec);
  EXPECT_EQ(stats.live_regions, 2u);
  EXPECT_EQ(stats.live_bytes, 120u);
}

TEST_F(asio_bridge, AsyncPrefetchRecordsTheLastPrefetchLocation) {
  auto ref = uma_->allocate<float>(1024);
  const auto [ec, res] =
      finish(asio::async_prefetch(bridge_, ref, location::host_numa(0), net::deferred));
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.ranges, 1u);
  EXPECT_EQ(res.bytes, 4096u);
  EXPECT_EQ(uma_->attributes(ref).last_prefetch_location, location::host_numa(0));
}

TEST_F(asio_bridge, AsyncAdviseShowsInAsyncAttributes) {
  auto ref = uma_->allocate<float>(4096);
  const auto [advise_ec, res] = finish(
      asio::async_advise(bridge_, ref, advice::set_read_mostly, location::host(), net::deferred));
  EXPECT_FALSE(advise_ec) << advise_ec.message();
  const auto [ec, attrs] = finish(asio::async_attributes(bridge_, ref, net::deferred));
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(attrs.read_mostly);
}

TEST_F(asio_bridge, AsyncAdviseRefusesAHostAccessedBy) {
  auto ref = uma_->allocate<float>(16);
  asio::error_detail detail;
  const auto [ec, res] =
      finish(asio::async_advise(bridge_, ref, advice::set_accessed_by, location::host(),
                                asio::with_detail(net::deferred, detail)));
  EXPECT_EQ(ec, errc::invalid_argument) << detail.message;
  EXPECT_EQ(detail.code, ec);
}

TEST_F(asio_bridge, AsyncDiscardIsCounted) {
  auto ref = uma_->allocate<unsigned char>(8192);
  const auto [ec, res] = finish(asio::async_discard(bridge_, ref, net::deferred));
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.bytes, 8192u);
  EXPECT_EQ(uma_->stats().discards, 1u);
}

TEST_F(asio_bridge, AsyncFlushSeesARefDroppedOnTheIoThread) {
  std::optional<allocator_stats> after;
  net::co_spawn(
      io_,
      [&]() -> net::awaitable<void> {
        { auto ref = co_await asio::async_allocate<int>(bridge_, 100, net::use_awaitable); }
        after = co_await asio::async_flush(bridge_, net::use_awaitable);
      },
      net::detached);
  io_.run();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->allocations, 1u);
  EXPECT_EQ(after->live_regions, 0u);
}

}  // namespace
}  // namespace uma
