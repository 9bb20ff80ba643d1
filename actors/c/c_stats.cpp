#include <uma/actors/c/c_allocator.hpp>

#include <string_view>

namespace {

void add(std::string& out, std::string_view key, std::uint64_t value, bool comma = true) {
  out.append("  \"").append(key).append("\": ").append(std::to_string(value));
  out.append(comma ? ",\n" : "\n");
}

}  // namespace

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
  std::string out = "{\n  \"backend\": \"" + a.backend + "\",\n";
  add(out, "generation", a.generation);
  add(out, "quota_bytes", a.quota_bytes);
  add(out, "allocations", a.allocations);
  add(out, "releases", a.releases);
  add(out, "live_regions", a.live_regions);
  add(out, "live_bytes", a.live_bytes);
  add(out, "peak_bytes", a.peak_bytes);
  add(out, "total_bytes_allocated", a.total_bytes_allocated);
  add(out, "prefetches", a.prefetches);
  add(out, "prefetch_bytes", a.prefetch_bytes);
  add(out, "advises", a.advises);
  add(out, "discards", a.discards);
  add(out, "discard_bytes", a.discard_bytes);
  add(out, "inert_refusals", a.inert_refusals);
  add(out, "pending_jobs", a.pending_jobs);
  add(out, "live_leases", a.live_leases);
  add(out, "leased_bytes", a.leased_bytes);
  out.append("  \"failures\": {");
  for (std::size_t i = 1; i < uma::errc_slots; ++i)
    out.append(i == 1 ? "" : ", ")
        .append("\"")
        .append(uma::to_string(static_cast<uma::errc>(i)))
        .append("\": ")
        .append(std::to_string(a.failures[i]));
  out.append("},\n");
  add(out, "total_failures", a.total_failures());
  out.append("  \"cache\": {\n");
  add(out, "in_use_bytes", c.in_use_bytes);
  add(out, "requested_bytes", c.requested_bytes);
  add(out, "free_bytes", c.free_bytes);
  add(out, "blocks_in_use", c.blocks_in_use);
  add(out, "hits", c.hits);
  add(out, "misses", c.misses);
  add(out, "cross_stream_reuses", c.cross_stream_reuses);
  add(out, "events_recorded", c.events_recorded);
  add(out, "leases", c.leases);
  add(out, "leased_bytes", c.leased_bytes, false);
  out.append("  }\n}\n");
  return out;
}
