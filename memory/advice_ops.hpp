#pragma once

#include <span>

#include <uma/memory/advice_state.hpp>
#include <uma/sys/backend.hpp>

namespace uma {

/// Applies `what` (with `where`) to every range, or to none: if the runtime refuses one, the
/// ranges already advised get their previous advice back before the error is rethrown.
void apply_advice_whole(backend& b, std::span<const byte_range> ranges, advice what,
                        location where);

/// Takes every advice in `state` back from `range` (all kinds, for every device, when the state
/// is unknown). Used when an advised block is released. Logs and swallows runtime failures.
void reset_advice(backend& b, byte_range range, const advice_state& state, int devices) noexcept;

/// Puts back, on `r`, the part of `was` that advice `what` (with `where`) changed.
void restore_advice(backend& b, byte_range r, advice what, location where,
                    const range_attributes& was) noexcept;

}  // namespace uma
