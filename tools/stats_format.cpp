#include "tools/stats_format.hpp"

#include <cstdio>
#include <iterator>
#include <string_view>

#include "tools/json_print.hpp"

namespace uma::cli {

namespace {

struct field {
  std::string_view key;  ///< the allocator_stats member's name, the JSON key
  std::uint64_t allocator_stats::*member;
};

// In allocator_stats order (the keys `uma stats --json` has always printed).
constexpr field fields[] = {
    {"quota_bytes", &allocator_stats::quota_bytes},
    {"allocations", &allocator_stats::allocations},
    {"releases", &allocator_stats::releases},
    {"live_regions", &allocator_stats::live_regions},
    {"live_bytes", &allocator_stats::live_bytes},
    {"peak_bytes", &allocator_stats::peak_bytes},
    {"total_bytes_allocated", &allocator_stats::total_bytes_allocated},
    {"prefetches", &allocator_stats::prefetches},
    {"prefetch_bytes", &allocator_stats::prefetch_bytes},
    {"advises", &allocator_stats::advises},
    {"discards", &allocator_stats::discards},
    {"discard_bytes", &allocator_stats::discard_bytes},
    {"inert_refusals", &allocator_stats::inert_refusals},
    {"pending_jobs", &allocator_stats::pending_jobs},
    {"live_leases", &allocator_stats::live_leases},
    {"leased_bytes", &allocator_stats::leased_bytes},
    {"resident_bytes", &allocator_stats::resident_bytes},
    {"residency_to_device_bytes", &allocator_stats::residency_to_device_bytes},
    {"residency_to_host_bytes", &allocator_stats::residency_to_host_bytes},
    {"driver_to_device_bytes", &allocator_stats::driver_to_device_bytes},
    {"driver_to_host_bytes", &allocator_stats::driver_to_host_bytes},
    {"driver_page_faults", &allocator_stats::driver_page_faults},
};

}  // namespace

std::string human_bytes(std::uint64_t bytes) {
  constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024)
    return std::to_string(bytes) + " bytes";
  double value = static_cast<double>(bytes) / 1024;
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

boost::json::object to_json_object(const allocator_stats& s) {
  boost::json::object out;
  out["backend"] = s.backend;
  out["generation"] = s.generation;
  for (const auto& f : fields)
    out[f.key] = s.*f.member;
  boost::json::object failures;
  for (std::size_t i = 1; i < errc_slots; ++i)
    failures[to_string(static_cast<errc>(i))] = s.failures[i];
  out["failures"] = std::move(failures);
  out["total_failures"] = s.total_failures();
  return out;
}

std::string to_json(const allocator_stats& s) {
  return pretty_json(to_json_object(s));
}

}  // namespace uma::cli
