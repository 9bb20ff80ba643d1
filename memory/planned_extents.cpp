#include <uma/memory/planned_extents.hpp>

#include <algorithm>
#include <iterator>
#include <string>

#include <uma/sys/error.hpp>

namespace uma {

std::pair<std::size_t, std::size_t> planned_extents::pages_of(std::size_t region_bytes,
                                                              std::size_t offset, std::size_t bytes,
                                                              const char* what) {
  if (bytes == 0)
    raise(errc::invalid_argument, std::string(what) + ": a range of 0 bytes");
  if (offset > region_bytes || bytes > region_bytes - offset)
    raise(errc::invalid_argument, std::string(what) + ": bytes [" + std::to_string(offset) + ", +" +
                                      std::to_string(bytes) + ") pass the region's end (" +
                                      std::to_string(region_bytes) + " bytes)");
  const auto last = offset + bytes;  // <= region_bytes: no overflow
  return {offset / page_bytes, last / page_bytes + (last % page_bytes != 0 ? 1 : 0)};
}

planned_extents::extent planned_extents::extent_of(std::uint64_t region, const region_extents& r,
                                                   std::size_t first, const piece& p) noexcept {
  const auto offset = first * page_bytes;
  const auto end = std::min(p.end * page_bytes, r.bytes);
  return {p.id, region, offset, end - offset};
}

void planned_extents::split_at(std::uint64_t region, region_extents& r, std::size_t page,
                               std::vector<split>& out) {
  auto it = r.pieces.upper_bound(page);
  if (it == r.pieces.begin())
    return;
  --it;
  if (it->first >= page || it->second.end <= page)
    return;  // starts there already, or ends before it
  const piece tail{it->second.end, next_id_};
  where_.emplace(tail.id, std::pair{region, page});
  r.pieces.emplace(page, tail);
  ++next_id_;
  it->second.end = page;
  out.push_back({it->second.id, tail.id, extent_of(region, r, page, tail).bytes});
}

void planned_extents::collect(std::uint64_t region, region_extents& r, std::size_t first,
                              std::size_t end, cover& out) {
  auto it = r.pieces.lower_bound(first);
  for (std::size_t at = first; at < end;) {
    if (it != r.pieces.end() && it->first == at) {
      out.extents.push_back(extent_of(region, r, it->first, it->second));
      at = it->second.end;
      ++it;
      continue;
    }
    // Pages no extent has, up to the next extent or the range's end: a new extent.
    const auto until = it == r.pieces.end() ? end : std::min(it->first, end);
    const piece fresh{until, next_id_};
    where_.emplace(fresh.id, std::pair{region, at});
    r.pieces.emplace(at, fresh);
    ++next_id_;
    out.extents.push_back(extent_of(region, r, at, fresh));
    out.created.push_back(fresh.id);
    at = until;
  }
}

planned_extents::cover planned_extents::cover_range(std::uint64_t region, std::size_t region_bytes,
                                                    std::size_t offset, std::size_t bytes) {
  const auto [first, end] = pages_of(region_bytes, offset, bytes, "will_access");
  const auto known = regions_.find(region);
  if (known != regions_.end() && known->second.bytes != region_bytes)
    raise(errc::invalid_argument, "will_access: region " + std::to_string(region) + " has " +
                                      std::to_string(known->second.bytes) + " bytes, not " +
                                      std::to_string(region_bytes));
  auto& r = regions_[region];
  r.bytes = region_bytes;
  cover out;
  split_at(region, r, first, out.splits);
  split_at(region, r, end, out.splits);
  collect(region, r, first, end, out);
  return out;
}

planned_extents::cover planned_extents::planned_range(std::uint64_t region,
                                                      std::size_t region_bytes, std::size_t offset,
                                                      std::size_t bytes, const char* what) {
  const auto [first, end] = pages_of(region_bytes, offset, bytes, what);
  const auto found = regions_.find(region);
  const auto gap = [&](std::size_t page) {
    raise(errc::invalid_argument, std::string(what) + ": page " + std::to_string(page) +
                                      " (bytes from " + std::to_string(page * page_bytes) +
                                      ") of region " + std::to_string(region) + " is in no plan");
  };
  if (found == regions_.end())
    gap(first);
  auto& r = found->second;
  // Every page in an extent, checked before a split changes anything.
  auto it = r.pieces.upper_bound(first);
  if (it != r.pieces.begin() && std::prev(it)->second.end > first)
    --it;
  for (std::size_t at = first; at < end; ++it) {
    if (it == r.pieces.end() || it->first > at)
      gap(at);
    at = it->second.end;
  }
  cover out;
  split_at(region, r, first, out.splits);
  split_at(region, r, end, out.splits);
  collect(region, r, first, end, out);
  return out;
}

void planned_extents::erase(std::span<const std::uint64_t> ids) noexcept {
  for (const auto id : ids) {
    const auto w = where_.find(id);
    if (w == where_.end())
      continue;
    const auto r = regions_.find(w->second.first);
    if (r != regions_.end()) {
      r->second.pieces.erase(w->second.second);
      if (r->second.pieces.empty())
        regions_.erase(r);
    }
    where_.erase(w);
  }
}

std::optional<planned_extents::extent> planned_extents::find(std::uint64_t id) const noexcept {
  const auto w = where_.find(id);
  if (w == where_.end())
    return std::nullopt;
  const auto& r = regions_.at(w->second.first);
  return extent_of(w->second.first, r, w->second.second, r.pieces.at(w->second.second));
}

std::vector<planned_extents::extent> planned_extents::of(std::uint64_t region) const {
  std::vector<extent> out;
  const auto r = regions_.find(region);
  if (r == regions_.end())
    return out;
  for (const auto& [first, p] : r->second.pieces)
    out.push_back(extent_of(region, r->second, first, p));
  return out;
}

std::size_t planned_extents::covered(std::uint64_t region) const noexcept {
  std::size_t out = 0;
  const auto r = regions_.find(region);
  if (r != regions_.end())
    for (const auto& [first, p] : r->second.pieces)
      out += extent_of(region, r->second, first, p).bytes;
  return out;
}

}  // namespace uma
