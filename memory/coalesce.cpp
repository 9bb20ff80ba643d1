#include <uma/memory/coalesce.hpp>

#include <algorithm>
#include <tuple>

namespace uma {

coalesced_ranges coalesce(std::vector<keyed_range> in) {
  const auto begin_of = [](const keyed_range& k) {
    return reinterpret_cast<std::uintptr_t>(k.range.ptr);
  };
  std::sort(in.begin(), in.end(), [&](const keyed_range& a, const keyed_range& b) {
    return std::tuple(a.where, a.allocation, begin_of(a)) <
           std::tuple(b.where, b.allocation, begin_of(b));
  });
  coalesced_ranges out;
  out.ranges.reserve(in.size());
  out.locations.reserve(in.size());
  for (std::size_t i = 0; i < in.size();) {
    auto start = begin_of(in[i]);
    auto end = start + in[i].range.bytes;
    std::size_t j = i + 1;
    for (; j < in.size() && in[j].where == in[i].where && in[j].allocation == in[i].allocation &&
           begin_of(in[j]) <= end;
         ++j)
      end = std::max(end, begin_of(in[j]) + in[j].range.bytes);
    out.ranges.push_back({reinterpret_cast<void*>(start), end - start});
    out.locations.push_back(in[i].where);
    i = j;
  }
  if (!out.locations.empty() &&
      std::all_of(out.locations.begin(), out.locations.end(),
                  [&](const location& l) { return l == out.locations.front(); }))
    out.locations.resize(1);
  return out;
}

}  // namespace uma
