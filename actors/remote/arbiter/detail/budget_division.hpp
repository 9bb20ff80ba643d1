#pragma once

// How the arbiter divides one device's shareable bytes among its members
// (docs/distributed.md "Policies"): guaranteed minimums first, then priority, then weights;
// an idle member lends what it holds above its minimum. A pure function, tested on its own.

#include <cstdint>
#include <span>
#include <vector>

#include <uma/actors/remote/arbiter/arbiter_types.hpp>

namespace uma::detail {

/// The bytes each claim gets out of `total`, in the claims' order:
/// 1. every claim its `min_bytes` (the caller admitted the claims so that the minimums fit);
/// 2. then, priority by priority from the highest, each claim up to its `wanted_bytes` (an idle
///    claim wants only its minimum) while bytes are left; where a priority's wants do not all
///    fit, what is left is shared among them in proportion to their weights, none above its
///    want (water-filling), rounded down to whole pages of 4 KiB, and the priorities below get
///    nothing more (not even the pages the rounding left);
/// 3. what nobody wants stays undivided.
/// The sum of the result never exceeds `total`.
[[nodiscard]] std::vector<std::uint64_t> divide_budget(std::uint64_t total,
                                                       std::span<const arbiter_claim> claims);

}  // namespace uma::detail
