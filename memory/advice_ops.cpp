#include <uma/memory/advice_ops.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <vector>

#include <uma/sys/log.hpp>

namespace uma {

void apply_advice_whole(backend& b, std::span<const byte_range> ranges, advice what,
                        location where) {
  std::vector<range_attributes> before;
  if (ranges.size() > 1) {
    before.reserve(ranges.size());
    for (const auto& r : ranges)
      before.push_back(b.attributes(r));
  }
  std::size_t done = 0;
  try {
    for (; done < ranges.size(); ++done)
      b.advise(ranges[done], what, where);
  } catch (...) {
    for (std::size_t i = 0; i < done && i < before.size(); ++i)
      restore_advice(b, ranges[i], what, where, before[i]);
    throw;
  }
}

/// Takes every advice in `state` back from `range` (all of them when the state is unknown).
void reset_advice(backend& b, byte_range range, const advice_state& state, int devices) noexcept {
  try {
    if (!state.known || state.read_mostly)
      b.advise(range, advice::unset_read_mostly, location::host());
    if (!state.known || state.preferred)
      b.advise(range, advice::unset_preferred_location, location::host());
    if (state.known) {
      for (const auto& loc : state.accessed_by)
        b.advise(range, advice::unset_accessed_by, loc);
    } else {
      for (int d = 0; d < devices; ++d)
        b.advise(range, advice::unset_accessed_by, location::device(d));
    }
  } catch (const std::exception& e) {
    log(log_level::warning,
        std::string("could not reset the advice of a released pool block: ") + e.what());
  }
}

void restore_advice(backend& b, byte_range r, advice what, location where,
                    const range_attributes& was) noexcept {
  try {
    switch (what) {
      case advice::set_read_mostly:
      case advice::unset_read_mostly:
        b.advise(r, was.read_mostly ? advice::set_read_mostly : advice::unset_read_mostly, where);
        return;
      case advice::set_preferred_location:
      case advice::unset_preferred_location:
        if (was.preferred_location)
          b.advise(r, advice::set_preferred_location, *was.preferred_location);
        else
          b.advise(r, advice::unset_preferred_location, where);
        return;
      case advice::set_accessed_by:
      case advice::unset_accessed_by: {
        const bool had = std::find(was.accessed_by.begin(), was.accessed_by.end(), where) !=
                         was.accessed_by.end();
        b.advise(r, had ? advice::set_accessed_by : advice::unset_accessed_by, where);
        return;
      }
    }
  } catch (const std::exception& e) {
    log(log_level::warning,
        std::string("could not restore advice after a failed batch: ") + e.what());
  }
}

}  // namespace uma
