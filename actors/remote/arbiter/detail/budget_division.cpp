#include <uma/actors/remote/arbiter/detail/budget_division.hpp>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <set>

namespace uma::detail {
namespace {

constexpr std::uint64_t page_bytes = 4096;

/// What a claim would use: its want, never below its minimum; an idle claim only its minimum.
std::uint64_t want_of(const arbiter_claim& c) {
  return c.idle ? c.min_bytes : std::max(c.wanted_bytes, c.min_bytes);
}

/// The weight the division uses: the book admits 1..1000; anything else is brought into range
/// here so that a share's arithmetic below cannot overflow.
std::uint64_t weight_of(const arbiter_claim& c) {
  return std::clamp<std::uint64_t>(c.weight, 1, 1000);
}

/// `left * weight / weights` without overflow (weight <= 1000, weights <= n * 1000).
std::uint64_t share_of(std::uint64_t left, std::uint64_t weight, std::uint64_t weights) {
  return left / weights * weight + left % weights * weight / weights;
}

/// Gives every claim its minimum (capped, should the minimums not fit); returns what is left.
std::uint64_t give_minimums(std::uint64_t total, std::span<const arbiter_claim> claims,
                            std::vector<std::uint64_t>& out) {
  std::uint64_t left = total;
  for (std::size_t i = 0; i < claims.size(); ++i) {
    out[i] = std::min(claims[i].min_bytes, left);
    left -= out[i];
  }
  return left;
}

/// Water-fills one priority's claims (`level`, indices into `claims`) from `left`: each claim
/// still short of its want is offered its weight's share of what is left; those the offer
/// fills take their want and drop out, and the rest share again, until an offer fills nobody:
/// then each takes its share, rounded down to a page. Returns what is left.
std::uint64_t fill_level(std::vector<std::size_t> level, std::span<const arbiter_claim> claims,
                         std::vector<std::uint64_t>& out, std::uint64_t left) {
  while (!level.empty() && left > 0) {
    std::uint64_t weights = 0;
    for (auto i : level)
      weights += weight_of(claims[i]);
    std::vector<std::size_t> short_of_want;
    std::uint64_t filled = 0;
    for (auto i : level) {
      const auto need = want_of(claims[i]) - out[i];
      if (need <= share_of(left, weight_of(claims[i]), weights)) {
        out[i] += need;
        filled += need;
      } else {
        short_of_want.push_back(i);
      }
    }
    if (short_of_want.size() == level.size()) {
      for (auto i : level) {
        const auto share = share_of(left, weight_of(claims[i]), weights);
        const auto given = std::max(out[i], (out[i] + share) / page_bytes * page_bytes);
        filled += given - out[i];
        out[i] = given;
      }
      return left - filled;
    }
    left -= filled;  // the filled needs are each within their share: together within `left`
    level = std::move(short_of_want);
  }
  return left;
}

}  // namespace

std::vector<std::uint64_t> divide_budget(std::uint64_t total,
                                         std::span<const arbiter_claim> claims) {
  std::vector<std::uint64_t> out(claims.size(), 0);
  std::uint64_t left = give_minimums(total, claims, out);
  std::set<std::uint32_t, std::greater<>> priorities;
  for (const auto& c : claims)
    priorities.insert(c.priority);
  for (auto priority : priorities) {
    if (left == 0)
      break;
    std::vector<std::size_t> level;
    for (std::size_t i = 0; i < claims.size(); ++i)
      if (claims[i].priority == priority && want_of(claims[i]) > out[i])
        level.push_back(i);
    left = fill_level(level, claims, out, left);
    if (std::any_of(level.begin(), level.end(),
                    [&](auto i) { return out[i] < want_of(claims[i]); }))
      break;  // the pages its rounding left over are not a lower priority's
  }
  return out;
}

}  // namespace uma::detail
