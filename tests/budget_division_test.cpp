// How the arbiter divides one device (actors/remote/arbiter/detail/budget_division.hpp), on its
// own: minimums first, then priority by priority, weights within a priority, idle claims lending
// what they hold above their minimum, and never more than the total.

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include <uma/actors/remote/arbiter/detail/budget_division.hpp>

namespace uma {
namespace {

using detail::divide_budget;

constexpr std::uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

arbiter_claim claim(std::uint64_t min, std::uint64_t wanted, std::uint32_t priority = 0,
                    std::uint32_t weight = 1, bool idle = false) {
  return arbiter_claim{0, min, wanted, priority, weight, idle};
}

std::uint64_t sum(const std::vector<std::uint64_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::uint64_t{0});
}

TEST(BudgetDivision, NoClaimsDivideNothing) {
  EXPECT_TRUE(divide_budget(GiB, {}).empty());
}

TEST(BudgetDivision, EveryWantIsMetWhenTheyFit) {
  const std::vector<arbiter_claim> claims{claim(0, 100 * MiB), claim(10 * MiB, 300 * MiB)};
  EXPECT_EQ(divide_budget(GiB, claims), (std::vector<std::uint64_t>{100 * MiB, 300 * MiB}));
}

TEST(BudgetDivision, MinimumsComeBeforeAnyPriority) {
  // The high priority wants everything; the low one still gets its guaranteed minimum.
  const std::vector<arbiter_claim> claims{claim(0, GiB, 10), claim(256 * MiB, GiB, 0)};
  EXPECT_EQ(divide_budget(GiB, claims), (std::vector<std::uint64_t>{768 * MiB, 256 * MiB}));
}

TEST(BudgetDivision, AHigherPriorityIsServedFirst) {
  const std::vector<arbiter_claim> claims{claim(0, GiB, 0), claim(0, 600 * MiB, 5),
                                          claim(0, GiB, 0)};
  const auto out = divide_budget(GiB, claims);
  EXPECT_EQ(out[1], 600 * MiB);
  EXPECT_EQ(out[0] + out[2], 424 * MiB);
  EXPECT_EQ(out[0], out[2]);
}

TEST(BudgetDivision, WeightsOneToThreeSplitOneToThree) {
  const std::vector<arbiter_claim> claims{claim(0, GiB, 0, 1), claim(0, GiB, 0, 3)};
  EXPECT_EQ(divide_budget(GiB, claims), (std::vector<std::uint64_t>{256 * MiB, 768 * MiB}));
}

TEST(BudgetDivision, AFilledClaimLeavesItsShareToTheOthers) {
  // Equal weights: a third each would be 341 MiB, but the first wants 100 MiB only.
  const std::vector<arbiter_claim> claims{claim(0, 100 * MiB), claim(0, GiB), claim(0, GiB)};
  const auto out = divide_budget(GiB, claims);
  EXPECT_EQ(out[0], 100 * MiB);
  EXPECT_EQ(out[1], 462 * MiB);
  EXPECT_EQ(out[2], 462 * MiB);
}

TEST(BudgetDivision, AnIdleClaimLendsAllAboveItsMinimum) {
  const std::vector<arbiter_claim> claims{claim(64 * MiB, GiB, 0, 1, true), claim(0, GiB)};
  EXPECT_EQ(divide_budget(GiB, claims), (std::vector<std::uint64_t>{64 * MiB, 960 * MiB}));
}

TEST(BudgetDivision, WhatNobodyWantsStaysUndivided) {
  const std::vector<arbiter_claim> claims{claim(0, 4 * KiB), claim(0, 0)};
  EXPECT_EQ(divide_budget(GiB, claims), (std::vector<std::uint64_t>{4 * KiB, 0}));
}

TEST(BudgetDivision, AWantBelowTheMinimumCountsAsTheMinimum) {
  const std::vector<arbiter_claim> claims{claim(128 * MiB, 0), claim(0, GiB)};
  EXPECT_EQ(divide_budget(GiB, claims), (std::vector<std::uint64_t>{128 * MiB, 896 * MiB}));
}

TEST(BudgetDivision, SharesAreRoundedDownToPages) {
  // 10 pages plus one byte among three equal claims: three pages each, one page and a byte left.
  const std::vector<arbiter_claim> claims{claim(0, GiB), claim(0, GiB), claim(0, GiB)};
  const auto out = divide_budget(10 * 4 * KiB + 1, claims);
  EXPECT_EQ(out, (std::vector<std::uint64_t>(3, 3 * 4 * KiB)));
}

TEST(BudgetDivision, MinimumsThatDoNotFitAreCappedAtTheTotal) {
  const std::vector<arbiter_claim> claims{claim(600 * MiB, GiB), claim(600 * MiB, GiB)};
  EXPECT_EQ(divide_budget(GiB, claims), (std::vector<std::uint64_t>{600 * MiB, 424 * MiB}));
}

TEST(BudgetDivision, HugeWantsAndTotalsDoNotOverflow) {
  const std::uint64_t total = ~std::uint64_t{0} / 4096 * 4096;
  const std::vector<arbiter_claim> claims{claim(0, total, 0, 1000), claim(0, total, 0, 1)};
  const auto out = divide_budget(total, claims);
  EXPECT_LE(out[0], total);
  EXPECT_GT(out[0], out[1] * 999);
  EXPECT_LE(out[0] + out[1], total);
  EXPECT_GE(out[0] + out[1], total - 2 * 4096);
}

/// A claim of random pages: minimum, want, priority 0..3, weight 1..1000, one in five idle.
arbiter_claim random_claim(std::mt19937_64& rng, std::uint64_t total, std::size_t n) {
  const std::uint64_t pages = total / 4096;
  auto page_count = [&](std::uint64_t most) {
    return std::uniform_int_distribution<std::uint64_t>(0, most)(rng) * 4096;
  };
  arbiter_claim c;
  c.min_bytes = rng() % 3 == 0 ? page_count(pages / (2 * n)) : 0;  // minimums fit together
  c.wanted_bytes = c.min_bytes + page_count(pages);
  c.priority = static_cast<std::uint32_t>(rng() % 4);
  c.weight = static_cast<std::uint32_t>(1 + rng() % 1000);
  c.idle = rng() % 5 == 0;
  return c;
}

std::uint64_t want(const arbiter_claim& c) {
  return c.idle ? c.min_bytes : std::max(c.min_bytes, c.wanted_bytes);
}

TEST(BudgetDivision, RandomClaimsKeepEveryRule) {
  std::mt19937_64 rng(20240611);
  for (int round = 0; round < 4000; ++round) {
    const std::uint64_t total = (1 + rng() % (1 << 20)) * 4096;
    std::vector<arbiter_claim> claims(1 + rng() % 12);
    for (auto& c : claims)
      c = random_claim(rng, total, claims.size());
    const auto out = divide_budget(total, claims);
    ASSERT_EQ(out.size(), claims.size());
    ASSERT_LE(sum(out), total) << "round " << round;
    bool anyone_short = false;
    std::uint32_t highest_short = 0;
    for (std::size_t i = 0; i < claims.size(); ++i) {
      ASSERT_GE(out[i], claims[i].min_bytes) << "round " << round << " claim " << i;
      ASSERT_LE(out[i], want(claims[i])) << "round " << round << " claim " << i;
      ASSERT_EQ(out[i] % 4096, 0u) << "round " << round << " claim " << i;
      if (out[i] < want(claims[i])) {
        anyone_short = true;
        highest_short = std::max(highest_short, claims[i].priority);
      }
    }
    // Nobody got more than its minimum at a priority below one left short of its want.
    for (std::size_t i = 0; i < claims.size(); ++i)
      if (anyone_short && claims[i].priority < highest_short) {
        ASSERT_EQ(out[i], claims[i].min_bytes) << "round " << round << " claim " << i;
      }
    // Where a want was left unmet, at most a page per claim stayed undivided (the rounding).
    if (anyone_short) {
      ASSERT_LT(total - sum(out), 4096 * claims.size()) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace uma
