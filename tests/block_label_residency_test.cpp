// A labelled block of the block allocator in the residency report (docs/residency.md "Labels"),
// on the host backend's emulated device: its pages are an extent of its slab's region, but the
// ledger's per-label sums and the account's refusals name the block by its own label and bytes,
// and a slot handed out again under another label charges that label from its next plan on.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "support/actor_fixture.hpp"

namespace uma {
namespace {

constexpr std::size_t page = 4096;
constexpr std::size_t MiB = std::size_t{1} << 20;

class labelled_block_residency : public test::actor_fixture {
 protected:
  labelled_block_residency() {
    uma_ = make_client(one_device_config());
    uma_->set_max_block_bytes(16 * MiB);  // the block allocator on: labelled allocates are blocks
  }
  /// The label's row of the residency report, or null.
  static const label_residency* row(const residency_report& r, std::string_view label) {
    const auto it = std::find_if(r.labels.begin(), r.labels.end(),
                                 [&](const label_residency& l) { return l.label == label; });
    return it == r.labels.end() ? nullptr : &*it;
  }
  static bool has_slab_row(const residency_report& r) {
    return std::any_of(r.labels.begin(), r.labels.end(),
                       [](const label_residency& l) { return l.label.starts_with("slab:"); });
  }
};

TEST_F(labelled_block_residency, APlannedLabelledBlockIsReportedUnderItsOwnLabel) {
  auto block = client::erase(uma_->allocate<std::byte>(2 * page, {.label = "weights"}));
  const auto placed = uma_->will_access({block}, 0, access_mode::read, residency_policy::migrate);
  EXPECT_EQ(placed.to_device_bytes, 2 * page);
  const auto r = uma_->residency();
  const auto* weights = row(r, "weights");
  ASSERT_NE(weights, nullptr);
  EXPECT_EQ(weights->moves.to_device_bytes, 2 * page);
  EXPECT_EQ(weights->moves.placements, 1u);
  EXPECT_FALSE(has_slab_row(r));  // not its slab's "slab: N x S bytes"
}

TEST_F(labelled_block_residency, ARangePlanWithinTheBlockIsItsLabelsToo) {
  auto block = client::erase(uma_->allocate<std::byte>(4 * page, {.label = "activations"}));
  const auto base = reinterpret_cast<std::uintptr_t>(block.range().ptr);
  access_plan_request req;
  req.policy = residency_policy::migrate;
  req.ranges.push_back(address_range{base + page, page});
  EXPECT_EQ(uma_->will_access(std::move(req)).to_device_bytes, page);
  const auto r = uma_->residency();
  ASSERT_NE(row(r, "activations"), nullptr);
  EXPECT_EQ(row(r, "activations")->moves.to_device_bytes, page);
  EXPECT_FALSE(has_slab_row(r));
}

TEST_F(labelled_block_residency, ASlotHandedOutAgainChargesItsNewLabelAndTheOldKeepsItsMoves) {
  auto first = client::erase(uma_->allocate<std::byte>(2 * page, {.label = "first"}));
  (void)uma_->will_access({first}, 0, access_mode::read, residency_policy::migrate);
  EXPECT_EQ(uma_->done_with({first}), 1u);
  (void)uma_->dead({first});  // discarded: the slot's extent stays in the account, not resident
  const auto* slot = first.range().ptr;
  first = {};
  // The slot goes back on its free list and is handed out again, under another label; its
  // extent's next plan counts for that label.
  auto second = client::erase(uma_->allocate<std::byte>(2 * page, {.label = "second"}));
  ASSERT_EQ(second.range().ptr, slot);
  (void)uma_->will_access({second}, 0, access_mode::read, residency_policy::migrate);
  const auto r = uma_->residency();
  ASSERT_NE(row(r, "first"), nullptr);
  EXPECT_EQ(row(r, "first")->moves.to_device_bytes, 2 * page);
  EXPECT_EQ(row(r, "first")->moves.discarded_bytes, 2 * page);
  ASSERT_NE(row(r, "second"), nullptr);
  EXPECT_EQ(row(r, "second")->moves.to_device_bytes, 2 * page);
  EXPECT_EQ(row(r, "second")->moves.discarded_bytes, 0u);
  EXPECT_FALSE(has_slab_row(r));
}

TEST_F(labelled_block_residency, ARefusalNamesTheBlockByItsLabelAndBytes) {
  auto block = client::erase(uma_->allocate<std::byte>(2 * page, {.label = "weights"}));
  (void)uma_->will_access({block}, 0, access_mode::read, residency_policy::migrate);
  EXPECT_EQ(uma_->done_with({block}), 1u);
  const auto before = uma_->residency();
  UMA_EXPECT_ERROR((void)uma_->done_with({block}), errc::invalid_argument,
                   "of block " + std::to_string(block.id()) + " ('weights', 8192 bytes)");
  EXPECT_EQ(uma_->residency().devices[0].held, before.devices[0].held);
}

}  // namespace
}  // namespace uma
