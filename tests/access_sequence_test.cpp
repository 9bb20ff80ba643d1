// The sequence form of access plans (actors/access_sequence.hpp) on the host backend with a
// 64 MiB residency device: each step's plan issued one step ahead where the budget holds both,
// at its own step where it does not, the budget never passed, every plan ended at the end.

#include <gtest/gtest.h>

#include <vector>

#include <uma/actors/access_sequence.hpp>

#include "support/actor_fixture.hpp"

namespace uma {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

class sequences : public test::actor_fixture {
 protected:
  sequences() { uma_ = make_client(one_device_config()); }

  /// `n` steps, each one region of `bytes`.
  std::vector<access_step> steps(std::size_t n, std::size_t bytes) {
    std::vector<access_step> out;
    for (std::size_t i = 0; i < n; ++i) {
      access_step s;
      s.refs.push_back(client::erase(uma_->allocate<std::byte>(bytes)));
      s.policy = residency_policy::migrate;
      out.push_back(std::move(s));
    }
    return out;
  }

  device_residency device() { return uma_->residency().devices.at(0); }
};

TEST_F(sequences, EachStepsPlanIsIssuedOneStepAheadAndTheStepBeforeEnds) {
  uma_->device_budget(0, 16 * MiB);
  access_sequence seq(*uma_, steps(5, 4 * MiB));  // 20 MiB: one step's region is always out
  auto first = seq.begin(0);
  EXPECT_EQ(first.placements, 1u);  // step 0's own plan; step 1's is on its way
  EXPECT_EQ(device().held, 8 * MiB);
  for (std::size_t i = 1; i < 12; ++i) {
    const auto r = seq.begin(i);
    EXPECT_EQ(r.placements, 1u) << "step " << i;  // this step's plan, sent at the step before
    EXPECT_EQ(r.evictions, i >= 4 ? 1u : 0u) << "step " << i;  // from the 5th region on
    const auto d = device();
    EXPECT_EQ(d.held, 8 * MiB) << "step " << i;  // this step and the next
    EXPECT_LE(d.resident, 16 * MiB);
  }
  EXPECT_EQ(seq.issued_ahead(), 11u);  // steps 1 to 11; step 12's plan is still on its way
  EXPECT_EQ(seq.refused_ahead(), 0u);
  seq.finish();
  EXPECT_EQ(device().held, 0u);
  EXPECT_LE(device().peak, 16 * MiB);
}

TEST_F(sequences, ALookaheadOfThreeKeepsThreePlansAheadWithinTheBudget) {
  uma_->device_budget(0, 16 * MiB);
  access_sequence seq(*uma_, steps(6, 4 * MiB), 3);  // this step and three ahead: the budget
  EXPECT_EQ(seq.begin(0).placements, 1u);
  EXPECT_EQ(device().held, 16 * MiB);
  for (std::size_t i = 1; i < 14; ++i) {
    const auto r = seq.begin(i);
    EXPECT_EQ(r.placements, 1u) << "step " << i;  // sent ahead three steps before
    const auto d = device();
    EXPECT_EQ(d.held, 16 * MiB) << "step " << i;
    EXPECT_LE(d.resident, 16 * MiB) << "step " << i;
  }
  EXPECT_EQ(seq.refused_ahead(), 0u);
  EXPECT_EQ(seq.issued_ahead(), 13u);  // steps 1 to 13 came from ahead; 14 to 16 are in flight
  seq.finish();
  EXPECT_EQ(device().held, 0u);
  EXPECT_LE(device().peak, 16 * MiB);
}

TEST_F(sequences, ALookaheadTheBudgetCannotHoldEndsPlansAheadToMakeRoom) {
  uma_->device_budget(0, 12 * MiB);
  access_sequence seq(*uma_, steps(5, 4 * MiB), 4);  // room for this step and two ahead only
  for (std::size_t i = 0; i < 15; ++i) {
    const auto r = seq.begin(i);
    EXPECT_LE(r.placements, 1u) << "step " << i;  // placed now, or still resident from before
    const auto d = device();
    EXPECT_GE(d.held, 4 * MiB) << "step " << i;  // this step's plan is in force
    EXPECT_LE(d.held, 12 * MiB) << "step " << i;
    EXPECT_LE(d.resident, 12 * MiB) << "step " << i;
  }
  EXPECT_GT(seq.refused_ahead(), 0u);
}

TEST_F(sequences, AStepTheBudgetCannotHoldAheadIsIssuedAtItsOwnStep) {
  uma_->device_budget(0, 8 * MiB);
  access_sequence seq(*uma_, steps(3, 6 * MiB));  // two steps need 12 MiB: never both
  for (std::size_t i = 0; i < 9; ++i) {
    const auto r = seq.begin(i);
    EXPECT_EQ(r.placements, 1u) << "step " << i;
    EXPECT_LE(device().resident, 8 * MiB);
  }
  EXPECT_EQ(seq.issued_ahead(), 0u);
  EXPECT_EQ(seq.refused_ahead(), 8u);  // steps 1 to 8; step 9's plan is still on its way
}

TEST_F(sequences, LeavingTheScopeEndsEveryPlanTheSequenceHolds) {
  uma_->device_budget(0, 16 * MiB);
  {
    access_sequence seq(*uma_, steps(2, 4 * MiB));
    (void)seq.begin(0);
    EXPECT_EQ(device().held, 8 * MiB);
  }
  EXPECT_EQ(device().held, 0u);
}

TEST_F(sequences, ASequenceOfNoStepOrAStepOfNoRefIsRefused) {
  UMA_EXPECT_ERROR(access_sequence(*uma_, {}), errc::invalid_argument, "a sequence of no step");
  auto s = steps(2, MiB);
  s[1].refs.clear();
  UMA_EXPECT_ERROR(access_sequence(*uma_, s), errc::invalid_argument, "step 1 names no ref");
  UMA_EXPECT_ERROR(access_sequence(*uma_, steps(3, MiB), 3), errc::invalid_argument,
                   "a lookahead of 3 steps in a sequence of 3 (at most 2)");
}

}  // namespace
}  // namespace uma
