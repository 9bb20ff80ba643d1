#pragma once

// What the arbiter's requests must satisfy (docs/distributed.md "Hostile or broken members"):
// names, weights, and a join's claim against the device's total and the tenant's policy. Each
// check throws invalid_argument naming what was wrong and changes nothing; the book
// (arbiter_book.hpp) runs them before it changes any state.

#include <cstdint>
#include <optional>
#include <string>

#include <uma/actors/remote/arbiter/arbiter_types.hpp>

namespace uma::detail {

/// "member 3 (uid 1000/infer)": how refusals and the ledger name a member.
[[nodiscard]] std::string member_name(std::uint64_t id, const std::string& tenant);
/// The identity part of a tenant "<identity>/<name>" (a name has no '/'); empty without one.
[[nodiscard]] std::string identity_of(const std::string& tenant);
/// Refuses a name that is empty, longer than 64 characters or not printable ASCII without '/'.
/// The message never repeats the name itself: it may hold what a terminal should not print.
void check_name(const std::string& what, const std::string& name);
/// Refuses a weight outside 1..1000.
void check_weight(const std::string& what, int device, std::uint32_t weight);
/// Refuses a claim of `tenant` on a device the arbiter does not divide (`total` empty), with a
/// weight out of range, a minimum, priority or weight above the tenant's policy `p` ("... is the
/// operator's"), or wanted bytes above the total or below its own minimum.
void check_claim(const std::string& tenant, const arbiter_claim& c,
                 std::optional<std::uint64_t> total, const arbiter_policy& p);

}  // namespace uma::detail
