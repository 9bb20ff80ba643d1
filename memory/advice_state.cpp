#include <uma/memory/advice_state.hpp>

#include <algorithm>

namespace uma {

bool advice_state::unchanged_by(advice a, const location& loc) const noexcept {
  if (!known)
    return false;
  const bool listed = std::binary_search(accessed_by.begin(), accessed_by.end(), loc);
  switch (a) {
    case advice::set_read_mostly:
      return read_mostly;
    case advice::unset_read_mostly:
      return !read_mostly;
    case advice::set_preferred_location:
      return preferred == loc;
    case advice::unset_preferred_location:
      return !preferred.has_value();
    case advice::set_accessed_by:
      return listed;
    case advice::unset_accessed_by:
      return !listed;
  }
  return false;
}

void advice_state::apply(advice a, const location& loc) {
  switch (a) {
    case advice::set_read_mostly:
      read_mostly = true;
      return;
    case advice::unset_read_mostly:
      read_mostly = false;
      return;
    case advice::set_preferred_location:
      preferred = loc;
      return;
    case advice::unset_preferred_location:
      preferred.reset();
      return;
    case advice::set_accessed_by: {
      auto pos = std::lower_bound(accessed_by.begin(), accessed_by.end(), loc);
      if (pos == accessed_by.end() || *pos != loc)
        accessed_by.insert(pos, loc);
      return;
    }
    case advice::unset_accessed_by:
      std::erase(accessed_by, loc);
      return;
  }
}

}  // namespace uma
