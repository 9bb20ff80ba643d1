#include <uma/memory/allocator_stats.hpp>

#include <numeric>
#include <type_traits>

#include <uma/memory/stats_fields.hpp>

namespace uma {

namespace {

/// A compile error here means `allocator_stats` gained or lost a member: add it to (or remove it
/// from) the field table in memory/stats_fields.hpp, so that every renderer shows it.
[[maybe_unused]] void table_covers_every_member(const allocator_stats& s) {
  [[maybe_unused]] const auto& [backend, generation, quota_bytes, allocations, releases,
                                live_regions, live_bytes, peak_bytes, total_bytes_allocated,
                                prefetches, prefetch_bytes, advises, discards, discard_bytes,
                                inert_refusals, pending_jobs, advice_elided, ranges_coalesced,
                                reserved_bytes, live_leases, leased_bytes, resident_bytes,
                                residency_to_device_bytes, residency_to_host_bytes,
                                driver_to_device_bytes, driver_to_host_bytes, driver_page_faults,
                                host_tier_bytes, device_tier_bytes, copy_to_device_bytes,
                                copy_to_host_bytes, copy_other_bytes, copies, failures] = s;
  static_assert(allocator_stats_field_count == 34, "the table names every member once");
}

/// No two fields share a name or a member.
consteval bool fields_are_distinct() {
  bool distinct = true;
  std::size_t i = 0;
  for_each_stats_field([&](const auto& a) {
    std::size_t j = 0;
    for_each_stats_field([&](const auto& b) {
      if (j++ <= i)
        return;
      if (a.name == b.name)
        distinct = false;
      if constexpr (std::is_same_v<decltype(a.member), decltype(b.member)>)
        if (a.member == b.member)
          distinct = false;
    });
    ++i;
  });
  return distinct;
}
static_assert(fields_are_distinct());

}  // namespace

std::uint64_t allocator_stats::total_failures() const noexcept {
  return std::accumulate(failures.begin(), failures.end(), std::uint64_t{0});
}

std::string to_string(const allocator_stats& s) {
  std::string out = "backend: " + s.backend + ", generation " + std::to_string(s.generation) + '\n';
  for_each_stats_field([&](const auto& f) {
    using type = stats_field_type<decltype(f)>;
    const auto& value = s.*f.member;
    if constexpr (std::is_same_v<type, std::uint64_t> || std::is_same_v<type, double>) {
      if (f.kind != stat_kind::identity)
        out.append("  ").append(f.name).append(": ").append(std::to_string(value)) += '\n';
    } else if constexpr (!std::is_same_v<type, std::string>) {  // the failures, by code
      for (std::size_t i = 1; i < errc_slots; ++i)
        if (value[i] != 0)
          out.append("  ")
              .append(f.name)
              .append(".")
              .append(to_string(static_cast<errc>(i)))
              .append(": ")
              .append(std::to_string(value[i])) += '\n';
    }
  });
  return out;
}

}  // namespace uma
