#include <uma/memory/allocator_stats.hpp>

#include <numeric>

namespace uma {

std::uint64_t allocator_stats::total_failures() const noexcept {
  return std::accumulate(failures.begin(), failures.end(), std::uint64_t{0});
}

std::string to_string(const allocator_stats& s) {
  std::string out;
  auto line = [&out](const char* name, std::uint64_t v) {
    out += "  ";
    out += name;
    out += ": ";
    out += std::to_string(v);
    out += '\n';
  };
  out += "backend: " + s.backend + ", generation " + std::to_string(s.generation) + '\n';
  line("quota_bytes", s.quota_bytes);
  line("allocations", s.allocations);
  line("releases", s.releases);
  line("live_regions", s.live_regions);
  line("live_bytes", s.live_bytes);
  line("peak_bytes", s.peak_bytes);
  line("total_bytes_allocated", s.total_bytes_allocated);
  line("prefetches", s.prefetches);
  line("prefetch_bytes", s.prefetch_bytes);
  line("advises", s.advises);
  line("discards", s.discards);
  line("discard_bytes", s.discard_bytes);
  line("inert_refusals", s.inert_refusals);
  line("live_leases", s.live_leases);
  line("leased_bytes", s.leased_bytes);
  line("resident_bytes", s.resident_bytes);
  line("residency_to_device_bytes", s.residency_to_device_bytes);
  line("residency_to_host_bytes", s.residency_to_host_bytes);
  line("driver_to_device_bytes", s.driver_to_device_bytes);
  line("driver_to_host_bytes", s.driver_to_host_bytes);
  line("driver_page_faults", s.driver_page_faults);
  for (std::size_t i = 1; i < errc_slots; ++i)
    if (s.failures[i] != 0)
      out += "  failures." + std::string(to_string(static_cast<errc>(i))) + ": " +
             std::to_string(s.failures[i]) + '\n';
  return out;
}

}  // namespace uma
