#include <uma/actors/c/c_allocator.hpp>

#include <algorithm>
#include <iterator>
#include <string_view>
#include <type_traits>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <uma/memory/stats_fields.hpp>

namespace {

/// A member of the C struct `uma_stats` that carries an `allocator_stats` field of that name.
template <class T>
struct c_member {
  std::string_view name;
  T uma_stats::*member;
};

// The struct's layout is ABI (actors/c/uma.h): members are only ever appended. These are the
// table's fields it carries; `carried` below proves it carries every numeric one. `pool_slabs`
// and `fragmentation` stay in the struct for its layout only (the pool policy's own slabs are
// gone: its small requests are the block allocator's blocks); they read 0.
constexpr c_member<std::uint64_t> c_counters[] = {
    {"generation", &uma_stats::generation},
    {"quota_bytes", &uma_stats::quota_bytes},
    {"live_bytes", &uma_stats::live_bytes},
    {"live_regions", &uma_stats::live_regions},
    {"peak_bytes", &uma_stats::peak_bytes},
    {"allocations", &uma_stats::allocations},
    {"releases", &uma_stats::releases},
    {"prefetch_bytes", &uma_stats::prefetch_bytes},
    {"discard_bytes", &uma_stats::discard_bytes},
    {"total_bytes_allocated", &uma_stats::total_bytes_allocated},
    {"prefetches", &uma_stats::prefetches},
    {"advises", &uma_stats::advises},
    {"discards", &uma_stats::discards},
    {"inert_refusals", &uma_stats::inert_refusals},
    {"pending_jobs", &uma_stats::pending_jobs},
    {"advice_elided", &uma_stats::advice_elided},
    {"ranges_coalesced", &uma_stats::ranges_coalesced},
    {"reserved_bytes", &uma_stats::reserved_bytes},
    {"live_leases", &uma_stats::live_leases},
    {"leased_bytes", &uma_stats::leased_bytes},
    {"resident_bytes", &uma_stats::resident_bytes},
    {"residency_to_device_bytes", &uma_stats::residency_to_device_bytes},
    {"residency_to_host_bytes", &uma_stats::residency_to_host_bytes},
    {"driver_to_device_bytes", &uma_stats::driver_to_device_bytes},
    {"driver_to_host_bytes", &uma_stats::driver_to_host_bytes},
    {"driver_page_faults", &uma_stats::driver_page_faults},
    {"host_tier_bytes", &uma_stats::host_tier_bytes},
    {"device_tier_bytes", &uma_stats::device_tier_bytes},
    {"copy_to_device_bytes", &uma_stats::copy_to_device_bytes},
    {"copy_to_host_bytes", &uma_stats::copy_to_host_bytes},
    {"copy_other_bytes", &uma_stats::copy_other_bytes},
    {"copies", &uma_stats::copies},
};

/// The C member named `name` among `members`, or null.
template <class T, std::size_t N>
constexpr T uma_stats::*c_member_of(const c_member<T> (&members)[N], std::string_view name) {
  const auto* it = std::find_if(std::begin(members), std::end(members),
                                [&](const auto& m) { return m.name == name; });
  return it == std::end(members) ? nullptr : it->member;
}

/// The C member of a table field of type `T` (none for the backend and the failures: JSON only).
template <class T>
constexpr T uma_stats::*c_member_for(std::string_view name) {
  if constexpr (std::is_same_v<T, std::uint64_t>)
    return c_member_of(c_counters, name);
  else
    return nullptr;
}

/// Every numeric field of the table has its C member, and the struct carries no other field of
/// the table.
consteval bool carried() {
  std::size_t numeric = 0;
  bool all = true;
  uma::for_each_stats_field([&](const auto& f) {
    using type = uma::stats_field_type<decltype(f)>;
    if constexpr (std::is_arithmetic_v<type>) {
      ++numeric;
      all = all && c_member_for<type>(f.name) != nullptr;
    }
  });
  return all && numeric == std::size(c_counters);
}
static_assert(carried(), "uma_stats (actors/c/uma.h) lacks a field of memory/stats_fields.hpp");

}  // namespace

uma_stats uma_allocator::stats() {
  const auto a = client->stats();
  const auto c = cache->stats();
  uma_stats s{};
  uma::for_each_stats_field([&](const auto& f) {
    using type = uma::stats_field_type<decltype(f)>;
    if constexpr (std::is_arithmetic_v<type>)
      s.*c_member_for<type>(f.name) = a.*f.member;
  });
  s.cache_in_use_bytes = c.in_use_bytes;
  s.cache_free_bytes = c.free_bytes;
  s.cache_hits = c.hits;
  s.cache_misses = c.misses;
  s.cache_requested_bytes = c.requested_bytes;
  s.cache_blocks_in_use = c.blocks_in_use;
  return s;
}

std::string uma_allocator::stats_json() {
  const auto a = client->stats();
  const auto c = cache->stats();
  // Every field of the table under its name (the keys of `uma stats --json`), then the block
  // allocator's counters under "cache".
  auto out = uma::stats_json_object<boost::json::object>(a);
  out["cache"] = {{"in_use_bytes", c.in_use_bytes},
                  {"requested_bytes", c.requested_bytes},
                  {"free_bytes", c.free_bytes},
                  {"blocks_in_use", c.blocks_in_use},
                  {"hits", c.hits},
                  {"misses", c.misses},
                  {"cross_stream_reuses", c.cross_stream_reuses},
                  {"events_recorded", c.events_recorded},
                  {"slabs", c.slabs},
                  {"slabs_held_bytes", c.slabs_held_bytes},
                  // slabs_held_bytes under its name before issue 38, one more release
                  {"slab_bytes", c.slabs_held_bytes}};
  return boost::json::serialize(out);
}
