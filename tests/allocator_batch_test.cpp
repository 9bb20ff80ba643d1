#include <gtest/gtest.h>

#include "support/actor_fixture.hpp"

namespace uma {
namespace {

using batch = test::actor_fixture;

std::vector<byte_ref> make_refs(client& c, int n) {
  std::vector<byte_ref> refs;
  for (int i = 0; i < n; ++i)
    refs.push_back(client::erase(c.allocate<float>(1024)));
  return refs;
}

TEST_F(batch, OneLocationIsBroadcastToEveryRefThroughTheBatchEntryPoint) {
  auto refs = make_refs(*uma_, 4);
  const auto res = uma_->prefetch(refs, {location::host_numa(0)});
  EXPECT_EQ(res.ranges, 4u);
  EXPECT_EQ(res.bytes, 4u * 4096u);
  for (const auto& r : refs)
    EXPECT_EQ(uma_->attributes(r).last_prefetch_location, location::host_numa(0));
  EXPECT_EQ(backend_->counters().batch_calls, 1u);
  EXPECT_EQ(backend_->counters().prefetch_calls, 0u);
}

TEST_F(batch, LocationsPairWithRefsByIndex) {
  auto refs = make_refs(*uma_, 3);
  uma_->prefetch(refs, {location::host(), location::host_numa(0), location::host()});
  EXPECT_EQ(uma_->attributes(refs[0]).last_prefetch_location, location::host());
  EXPECT_EQ(uma_->attributes(refs[1]).last_prefetch_location, location::host_numa(0));
  EXPECT_EQ(uma_->attributes(refs[2]).last_prefetch_location, location::host());
}

TEST_F(batch, MismatchedLengthsAreRefusedAndChangeNothing) {
  auto refs = make_refs(*uma_, 3);
  UMA_EXPECT_ERRC(uma_->prefetch(refs, {location::host(), location::host()}),
                  errc::invalid_argument);
  UMA_EXPECT_ERRC(uma_->prefetch(refs, {}), errc::invalid_argument);
  for (const auto& r : refs)
    EXPECT_FALSE(uma_->attributes(r).last_prefetch_location.has_value());
  EXPECT_EQ(backend_->counters().batch_calls, 0u);
}

TEST_F(batch, OneBadLocationRejectsTheWholeBatch) {
  auto refs = make_refs(*uma_, 3);
  uma_->prefetch(refs, {location::host()});
  UMA_EXPECT_ERRC(
      uma_->prefetch(refs, {location::host_numa(0), location::device(1), location::host_numa(0)}),
      errc::invalid_argument);
  for (const auto& r : refs)
    EXPECT_EQ(uma_->attributes(r).last_prefetch_location, location::host());
}

TEST_F(batch, OneInertRefRejectsTheWholeBatchAndIsCounted) {
  auto refs = make_refs(*uma_, 2);
  auto doomed = make_client(host_config());
  refs.push_back(client::erase(doomed->allocate<float>(16)));
  doomed->stop();
  UMA_EXPECT_ERRC(uma_->prefetch(refs, {location::host_numa(0)}), errc::allocator_stopped);
  EXPECT_FALSE(uma_->attributes(refs[0]).last_prefetch_location.has_value());
  EXPECT_EQ(uma_->stats().inert_refusals, 1u);
}

TEST_F(batch, DuplicateOrOverlappingRefsAreRefused) {
  auto ref = uma_->allocate<float>(1024);
  auto whole = client::erase(ref);
  UMA_EXPECT_ERRC(uma_->prefetch({whole, whole}, {location::host()}), errc::invalid_argument);
  UMA_EXPECT_ERRC(
      uma_->prefetch({client::erase(ref.subview(0, 512)), client::erase(ref.subview(100, 10))},
                     {location::host()}),
      errc::invalid_argument);
  // Disjoint views of one region are fine.
  uma_->prefetch({client::erase(ref.subview(0, 512)), client::erase(ref.subview(512, 512))},
                 {location::host()});
}

TEST_F(batch, AdviceOnManyRefsIsValidatedWholeFirst) {
  auto refs = make_refs(*uma_, 3);
  uma_->advise(refs, advice::set_read_mostly);
  for (const auto& r : refs)
    EXPECT_TRUE(uma_->attributes(r).read_mostly);
  auto stale = refs;
  stale.push_back(byte_ref{});
  UMA_EXPECT_ERRC(uma_->advise(stale, advice::unset_read_mostly), errc::invalid_argument);
  for (const auto& r : refs)
    EXPECT_TRUE(uma_->attributes(r).read_mostly);
}

TEST_F(batch, DiscardManyUsesOneBatchCall) {
  auto refs = make_refs(*uma_, 5);
  const auto before = backend_->counters().batch_calls;
  uma_->discard(refs);
  EXPECT_EQ(backend_->counters().batch_calls, before + 1);
  EXPECT_EQ(uma_->stats().discards, 5u);
}

}  // namespace
}  // namespace uma
