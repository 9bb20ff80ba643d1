#pragma once

// The C ABI's residency plans (actors/c/uma.h, docs/c_abi.md "Residency"): C arguments checked
// and turned into the allocator's plan requests, and its replies into C structs. Internal to
// libuma_c; not installed.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <uma/actors/access_sequence.hpp>
#include <uma/actors/c/c_allocator.hpp>

/// A sequence of plans (the C side of `uma_sequence`): steps collected until the first begin,
/// then a uma::access_sequence over them.
struct uma_sequence {
  uma_allocator* allocator = nullptr;
  std::size_t lookahead = 0;
  std::vector<uma::access_step> steps;
  std::unique_ptr<uma::access_sequence> running;  ///< made by the first uma_sequence_begin
};

namespace uma::c {

/// A plan's options checked over the defaults (`in` NULL: the defaults), as a plan request with
/// no range yet. Throws status_error naming `what` and the field for a bad value (an enum value
/// out of range, struct_size too small); the device is checked by the allocator.
[[nodiscard]] access_plan_request plan_of(uma_allocator& a, const uma_plan_options* in,
                                          const char* what);

/// The ranges checked: not NULL, at least one, each inside a block this allocator handed out
/// (UMA_ERR_UNKNOWN_POINTER otherwise, naming the address). Nothing changes.
[[nodiscard]] std::vector<address_range> ranges_of(uma_allocator& a, const uma_range* ranges,
                                                   std::size_t count, const char* what);

/// Throws UMA_ERR_INVALID_ARGUMENT when `out` is given with a struct_size too small to hold
/// its own size field (checked before anything changes).
void check_out(const std::uint32_t* struct_size, const char* what);

/// Writes `r` into `out` (NULL: nothing) up to its struct_size.
void write_result(const residency_result& r, uma_plan_result* out) noexcept;

/// The residency report as the C struct (devices past the 16th are counted, not filled).
[[nodiscard]] uma_residency_report report_of(const residency_report& r) noexcept;
/// The residency report as JSON (docs/c_abi.md "Residency").
[[nodiscard]] std::string report_json(const residency_report& r);

}  // namespace uma::c
