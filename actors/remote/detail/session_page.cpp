#include <uma/actors/remote/detail/session_page.hpp>

#include <algorithm>

namespace uma::detail {

std::optional<region_info> lease_row(const region_handle& h, const lease& l,
                                     std::chrono::steady_clock::time_point now) {
  const auto* rec = record_of(l.ref);
  if (!l.ref.valid() || (rec->is_block() && l.origin.label.empty()))
    return std::nullopt;
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - l.created).count();
  const auto refs = rec->refs.load(std::memory_order_relaxed);
  if (rec->is_block())  // a labelled block's row: its pins count in its slab's row
    return region_info{h.id, h.generation, rec->bytes, l.origin.label, attach_flag::global, refs,
                       0,    age};
  return region_info{h.id,
                     h.generation,
                     rec->bytes,
                     l.origin.label,
                     l.origin.attach,
                     refs,
                     rec->pins.load(std::memory_order_relaxed),
                     age,
                     rec->kind};
}

std::pair<remote_region_page, leased_map> own_page(const lease_book& book, std::uint64_t sid,
                                                   region_page p, std::uint32_t cap) {
  const std::uint64_t count = p.count == 0 ? cap : std::min(p.count, cap);
  const auto now = std::chrono::steady_clock::now();
  std::pair<remote_region_page, leased_map> out;
  auto& page = out.first;     // not a structured binding: clang 14 (the fuzz build) cannot
  auto& leased = out.second;  // capture one in a lambda
  book.for_each_lease([&](const region_handle& h, const lease& l) {
    auto row = lease_row(h, l, now);
    if (!row)
      return;
    const auto index = page.total++;
    if (index < p.start || index - p.start >= count)
      return;
    page.rows.push_back({std::move(*row), sid});
    leased.emplace(h, std::pair(sid, l.ref));
  });
  return out;
}

}  // namespace uma::detail
