#include <uma/actors/c/c_allocator.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

uma_stats uma_allocator::stats() {
  const auto a = client->stats();
  const auto c = cache->stats();
  uma_stats s{};
  s.generation = a.generation;
  s.quota_bytes = a.quota_bytes;
  s.live_bytes = a.live_bytes;
  s.live_regions = a.live_regions;
  s.peak_bytes = a.peak_bytes;
  s.allocations = a.allocations;
  s.releases = a.releases;
  s.cache_in_use_bytes = c.in_use_bytes;
  s.cache_free_bytes = c.free_bytes;
  s.cache_hits = c.hits;
  s.cache_misses = c.misses;
  s.prefetch_bytes = a.prefetch_bytes;
  s.discard_bytes = a.discard_bytes;
  s.cache_requested_bytes = c.requested_bytes;
  s.cache_blocks_in_use = c.blocks_in_use;
  return s;
}

std::string uma_allocator::stats_json() {
  const auto a = client->stats();
  const auto c = cache->stats();
  // The keys of `uma stats --json` (tools/stats_format.cpp), then the caching layer's.
  boost::json::object failures;
  for (std::size_t i = 1; i < uma::errc_slots; ++i)
    failures[uma::to_string(static_cast<uma::errc>(i))] = a.failures[i];
  boost::json::object out{{"backend", a.backend},
                          {"generation", a.generation},
                          {"quota_bytes", a.quota_bytes},
                          {"allocations", a.allocations},
                          {"releases", a.releases},
                          {"live_regions", a.live_regions},
                          {"live_bytes", a.live_bytes},
                          {"peak_bytes", a.peak_bytes},
                          {"total_bytes_allocated", a.total_bytes_allocated},
                          {"prefetches", a.prefetches},
                          {"prefetch_bytes", a.prefetch_bytes},
                          {"advises", a.advises},
                          {"discards", a.discards},
                          {"discard_bytes", a.discard_bytes},
                          {"inert_refusals", a.inert_refusals},
                          {"pending_jobs", a.pending_jobs},
                          {"live_leases", a.live_leases},
                          {"leased_bytes", a.leased_bytes},
                          {"resident_bytes", a.resident_bytes},
                          {"residency_to_device_bytes", a.residency_to_device_bytes},
                          {"residency_to_host_bytes", a.residency_to_host_bytes},
                          {"driver_to_device_bytes", a.driver_to_device_bytes},
                          {"driver_to_host_bytes", a.driver_to_host_bytes},
                          {"driver_page_faults", a.driver_page_faults},
                          {"failures", std::move(failures)},
                          {"total_failures", a.total_failures()},
                          {"cache",
                           {{"in_use_bytes", c.in_use_bytes},
                            {"requested_bytes", c.requested_bytes},
                            {"free_bytes", c.free_bytes},
                            {"blocks_in_use", c.blocks_in_use},
                            {"hits", c.hits},
                            {"misses", c.misses},
                            {"cross_stream_reuses", c.cross_stream_reuses},
                            {"events_recorded", c.events_recorded},
                            {"leases", c.leases},
                            {"leased_bytes", c.leased_bytes}}}};
  return boost::json::serialize(out);
}
