#pragma once

// The one field table of `allocator_stats`: every renderer reads it (CAF inspect, the text of
// `to_string`, `uma stats --json`, the C ABI's struct and JSON, Prometheus) and docs/cli.md's
// reference table is checked against it (tests/stats_fields_test.cpp). A field added to the
// struct and not here is a compile error (memory/allocator_stats.cpp), so no renderer can miss it.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <uma/memory/allocator_stats.hpp>

namespace uma {

/// What a stats field measures.
enum class stat_kind : std::uint8_t {
  identity,  ///< which allocator (backend, generation): a label of every Prometheus sample
  counter,   ///< only grows over an incarnation's life
  gauge,     ///< goes up and down
};

/// One member of `allocator_stats`: its name (the member's, the JSON key, the C ABI's `uma_stats`
/// member), the member itself, what it measures, and its Prometheus family.
template <class T>
struct stats_field {
  std::string_view name;       ///< the member's name
  T allocator_stats::*member;  ///< the member
  stat_kind kind;              ///< counter, gauge or identity
  std::string_view unit;       ///< what one of it is ("bytes", "regions", ...)
  std::string_view metric;     ///< Prometheus family ("" for identity: a label)
  std::string_view help;       ///< one line: the Prometheus HELP and the docs' meaning
};

namespace stats_fields_detail {

using a = allocator_stats;
using u64 = stats_field<std::uint64_t>;
constexpr auto counter = stat_kind::counter;
constexpr auto gauge = stat_kind::gauge;

}  // namespace stats_fields_detail

/// Every member of `allocator_stats`, in its declaration order (the order CAF serializes them).
inline constexpr std::tuple allocator_stats_fields{
    stats_field<std::string>{"backend", &stats_fields_detail::a::backend, stat_kind::identity, "",
                             "", "The backend: host or cuda."},
    stats_fields_detail::u64{"generation", &stats_fields_detail::a::generation, stat_kind::identity,
                             "", "",
                             "The incarnation (1 for the first; a supervisor's restart adds one)."},
    stats_fields_detail::u64{"quota_bytes", &stats_fields_detail::a::quota_bytes,
                             stats_fields_detail::gauge, "bytes", "uma_quota_bytes",
                             "Most bytes the allocator may hold at once."},
    stats_fields_detail::u64{"allocations", &stats_fields_detail::a::allocations,
                             stats_fields_detail::counter, "regions", "uma_allocations_total",
                             "Regions allocated."},
    stats_fields_detail::u64{"releases", &stats_fields_detail::a::releases,
                             stats_fields_detail::counter, "regions", "uma_releases_total",
                             "Regions whose last ref was dropped, handed back to the allocator."},
    stats_fields_detail::u64{"live_regions", &stats_fields_detail::a::live_regions,
                             stats_fields_detail::gauge, "regions", "uma_live_regions",
                             "Regions currently allocated."},
    stats_fields_detail::u64{"live_bytes", &stats_fields_detail::a::live_bytes,
                             stats_fields_detail::gauge, "bytes", "uma_live_bytes",
                             "Bytes currently allocated, alignment padding included."},
    stats_fields_detail::u64{"peak_bytes", &stats_fields_detail::a::peak_bytes,
                             stats_fields_detail::gauge, "bytes", "uma_peak_bytes",
                             "Highest live bytes so far."},
    stats_fields_detail::u64{"total_bytes_allocated",
                             &stats_fields_detail::a::total_bytes_allocated,
                             stats_fields_detail::counter, "bytes", "uma_allocated_bytes_total",
                             "Bytes allocated over the allocator's life."},
    stats_fields_detail::u64{"prefetches", &stats_fields_detail::a::prefetches,
                             stats_fields_detail::counter, "ranges", "uma_prefetches_total",
                             "Ranges prefetched (discard-and-prefetch included)."},
    stats_fields_detail::u64{"prefetch_bytes", &stats_fields_detail::a::prefetch_bytes,
                             stats_fields_detail::counter, "bytes", "uma_prefetched_bytes_total",
                             "Bytes prefetched."},
    stats_fields_detail::u64{"advises", &stats_fields_detail::a::advises,
                             stats_fields_detail::counter, "ranges", "uma_advises_total",
                             "Ranges advised."},
    stats_fields_detail::u64{"discards", &stats_fields_detail::a::discards,
                             stats_fields_detail::counter, "ranges", "uma_discards_total",
                             "Ranges discarded (discard-and-prefetch included)."},
    stats_fields_detail::u64{"discard_bytes", &stats_fields_detail::a::discard_bytes,
                             stats_fields_detail::counter, "bytes", "uma_discarded_bytes_total",
                             "Bytes discarded."},
    stats_fields_detail::u64{
        "inert_refusals", &stats_fields_detail::a::inert_refusals, stats_fields_detail::counter,
        "requests", "uma_inert_refusals_total",
        "Requests refused because a ref was inert (its allocator had stopped)."},
    stats_fields_detail::u64{"pending_jobs", &stats_fields_detail::a::pending_jobs,
                             stats_fields_detail::gauge, "jobs", "uma_pending_jobs",
                             "Backend calls queued off the allocator's loop, not yet run."},
    stats_fields_detail::u64{"advice_elided", &stats_fields_detail::a::advice_elided,
                             stats_fields_detail::counter, "calls", "uma_advice_elided_total",
                             "Advice calls skipped because they would have changed nothing."},
    stats_fields_detail::u64{"ranges_coalesced", &stats_fields_detail::a::ranges_coalesced,
                             stats_fields_detail::counter, "ranges", "uma_ranges_coalesced_total",
                             "Ranges merged into a neighbour before the backend call."},
    stats_fields_detail::u64{"reserved_bytes", &stats_fields_detail::a::reserved_bytes,
                             stats_fields_detail::gauge, "bytes", "uma_reserved_bytes",
                             "Bytes held from the backend under the quota (slabs and direct "
                             "regions)."},
    stats_fields_detail::u64{"live_leases", &stats_fields_detail::a::live_leases,
                             stats_fields_detail::gauge, "slabs", "uma_live_leases",
                             "Slabs of the block allocator (small blocks) held (C ABI name)."},
    stats_fields_detail::u64{"leased_bytes", &stats_fields_detail::a::leased_bytes,
                             stats_fields_detail::gauge, "bytes", "uma_leased_bytes",
                             "Bytes of the block allocator's slabs (part of live_bytes)."},
    stats_fields_detail::u64{
        "resident_bytes", &stats_fields_detail::a::resident_bytes, stats_fields_detail::gauge,
        "bytes", "uma_resident_bytes",
        "Bytes plans placed on devices (read-mostly copies included), all devices summed."},
    stats_fields_detail::u64{"residency_to_device_bytes",
                             &stats_fields_detail::a::residency_to_device_bytes,
                             stats_fields_detail::counter, "bytes",
                             "uma_plan_to_device_bytes_total", "Bytes plans moved host to device."},
    stats_fields_detail::u64{"residency_to_host_bytes",
                             &stats_fields_detail::a::residency_to_host_bytes,
                             stats_fields_detail::counter, "bytes", "uma_plan_to_host_bytes_total",
                             "Bytes evictions moved device to host."},
    stats_fields_detail::u64{
        "driver_to_device_bytes", &stats_fields_detail::a::driver_to_device_bytes,
        stats_fields_detail::counter, "bytes", "uma_driver_to_device_bytes_total",
        "Bytes the driver migrated to devices, as of the last residency report (0: off)."},
    stats_fields_detail::u64{
        "driver_to_host_bytes", &stats_fields_detail::a::driver_to_host_bytes,
        stats_fields_detail::counter, "bytes", "uma_driver_to_host_bytes_total",
        "Bytes the driver migrated to the host, as of the last residency report (0: off)."},
    stats_fields_detail::u64{
        "driver_page_faults", &stats_fields_detail::a::driver_page_faults,
        stats_fields_detail::counter, "faults", "uma_driver_page_faults_total",
        "CPU page faults and GPU fault groups, as of the last residency report (0: off)."},
    stats_fields_detail::u64{"host_tier_bytes", &stats_fields_detail::a::host_tier_bytes,
                             stats_fields_detail::gauge, "bytes", "uma_host_tier_bytes",
                             "Pinned host memory the allocator holds (the host tier)."},
    stats_fields_detail::u64{"device_tier_bytes", &stats_fields_detail::a::device_tier_bytes,
                             stats_fields_detail::gauge, "bytes", "uma_device_tier_bytes",
                             "Device memory the allocator holds for staging (charged to budgets)."},
    stats_fields_detail::u64{
        "copy_to_device_bytes", &stats_fields_detail::a::copy_to_device_bytes,
        stats_fields_detail::counter, "bytes", "uma_copy_to_device_bytes_total",
        "Bytes copied from the host tier to device-side memory on the copy engines."},
    stats_fields_detail::u64{
        "copy_to_host_bytes", &stats_fields_detail::a::copy_to_host_bytes,
        stats_fields_detail::counter, "bytes", "uma_copy_to_host_bytes_total",
        "Bytes copied from device-side memory to the host tier on the copy engines."},
    stats_fields_detail::u64{"copy_other_bytes", &stats_fields_detail::a::copy_other_bytes,
                             stats_fields_detail::counter, "bytes", "uma_copy_other_bytes_total",
                             "Bytes copied within one side (device to device, host to host)."},
    stats_fields_detail::u64{"copies", &stats_fields_detail::a::copies,
                             stats_fields_detail::counter, "copies", "uma_copies_total",
                             "Copies enqueued between the allocator's memory."},
    stats_field<std::array<std::uint64_t, errc_slots>>{
        "failures", &stats_fields_detail::a::failures, stats_fields_detail::counter, "requests",
        "uma_failures_total", "Failed requests by error code."},
};

/// Calls `fn(field)` for every field of the table, in order.
template <class Fn>
constexpr void for_each_stats_field(Fn&& fn) {
  std::apply([&](const auto&... field) { (fn(field), ...); }, allocator_stats_fields);
}

/// How many fields the table has.
inline constexpr std::size_t allocator_stats_field_count =
    std::tuple_size_v<std::remove_cvref_t<decltype(allocator_stats_fields)>>;

/// The field's member type (std::uint64_t, double, std::string or the failures array).
template <class Field>
using stats_field_type =
    std::remove_cvref_t<decltype(std::declval<allocator_stats>().*std::declval<Field>().member)>;

/// `s` as a JSON object of the table's fields under their names, the failures an object by error
/// code (zeros included), then `total_failures`: the schema of `uma stats --json` and of the C
/// ABI's `uma_stats_json`. `Object` is a JSON object type with `operator[](string_view)`
/// (boost::json::object): memory/ itself does not depend on a JSON library.
template <class Object>
[[nodiscard]] Object stats_json_object(const allocator_stats& s) {
  Object out;
  for_each_stats_field([&](const auto& f) {
    using type = stats_field_type<decltype(f)>;
    const auto& value = s.*f.member;
    if constexpr (std::is_same_v<type, std::array<std::uint64_t, errc_slots>>) {
      Object failures;
      for (std::size_t i = 1; i < errc_slots; ++i)
        failures[to_string(static_cast<errc>(i))] = value[i];
      out[f.name] = std::move(failures);
    } else {
      out[f.name] = value;
    }
  });
  out["total_failures"] = s.total_failures();
  return out;
}

}  // namespace uma
