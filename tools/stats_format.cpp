#include "tools/stats_format.hpp"

#include <cstdio>

namespace uma::cli {

namespace {

enum class metric_type : std::uint8_t { gauge, counter };

/// One numeric field of allocator_stats, as JSON key and as Prometheus metric family.
struct field {
  std::string_view key;     ///< the allocator_stats member's name, the JSON key
  std::string_view metric;  ///< Prometheus family name
  metric_type type;
  std::string_view help;
  std::uint64_t allocator_stats::*member;
};

// In allocator_stats order; both renderers walk this table, so they cannot drift apart.
constexpr field fields[] = {
    {"quota_bytes", "uma_quota_bytes", metric_type::gauge,
     "Most bytes the allocator may hold at once.", &allocator_stats::quota_bytes},
    {"allocations", "uma_allocations_total", metric_type::counter, "Regions allocated.",
     &allocator_stats::allocations},
    {"releases", "uma_releases_total", metric_type::counter,
     "Regions whose last ref was dropped, handed back to the allocator.",
     &allocator_stats::releases},
    {"live_regions", "uma_live_regions", metric_type::gauge, "Regions currently allocated.",
     &allocator_stats::live_regions},
    {"live_bytes", "uma_live_bytes", metric_type::gauge,
     "Bytes currently allocated, alignment padding included.", &allocator_stats::live_bytes},
    {"peak_bytes", "uma_peak_bytes", metric_type::gauge, "Highest live bytes so far.",
     &allocator_stats::peak_bytes},
    {"total_bytes_allocated", "uma_allocated_bytes_total", metric_type::counter,
     "Bytes allocated over the allocator's life.", &allocator_stats::total_bytes_allocated},
    {"prefetches", "uma_prefetches_total", metric_type::counter,
     "Ranges prefetched (discard-and-prefetch included).", &allocator_stats::prefetches},
    {"prefetch_bytes", "uma_prefetched_bytes_total", metric_type::counter, "Bytes prefetched.",
     &allocator_stats::prefetch_bytes},
    {"advises", "uma_advises_total", metric_type::counter, "Ranges advised.",
     &allocator_stats::advises},
    {"discards", "uma_discards_total", metric_type::counter,
     "Ranges discarded (discard-and-prefetch included).", &allocator_stats::discards},
    {"discard_bytes", "uma_discarded_bytes_total", metric_type::counter, "Bytes discarded.",
     &allocator_stats::discard_bytes},
    {"inert_refusals", "uma_inert_refusals_total", metric_type::counter,
     "Requests refused because a ref was inert (its allocator had stopped).",
     &allocator_stats::inert_refusals},
    {"pending_jobs", "uma_pending_jobs", metric_type::gauge,
     "Backend calls queued off the allocator's loop, not yet run.", &allocator_stats::pending_jobs},
    {"live_leases", "uma_live_leases", metric_type::gauge,
     "Block leases (client-side fast path) granted and not yet given back.",
     &allocator_stats::live_leases},
    {"leased_bytes", "uma_leased_bytes", metric_type::gauge,
     "Bytes held by block leases (part of live_bytes).", &allocator_stats::leased_bytes},
};

void append_header(std::string& out, std::string_view metric, std::string_view help,
                   metric_type type) {
  out += "# HELP ";
  out += metric;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += metric;
  out += type == metric_type::counter ? " counter\n" : " gauge\n";
}

}  // namespace

std::string json_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned char>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string prometheus_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

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

std::string to_json(const allocator_stats& s) {
  std::string out = "{\n  \"backend\": \"" + json_escape(s.backend) + "\",\n";
  out += "  \"generation\": " + std::to_string(s.generation) + ",\n";
  for (const auto& f : fields) {
    out += "  \"";
    out += f.key;
    out += "\": " + std::to_string(s.*f.member) + ",\n";
  }
  out += "  \"failures\": {";
  for (std::size_t i = 1; i < errc_slots; ++i) {
    out += i == 1 ? "\n" : ",\n";
    out += "    \"";
    out += to_string(static_cast<errc>(i));
    out += "\": " + std::to_string(s.failures[i]);
  }
  out += "\n  },\n";
  out += "  \"total_failures\": " + std::to_string(s.total_failures()) + "\n}\n";
  return out;
}

std::string to_prometheus(const allocator_stats& s) {
  const std::string labels = "backend=\"" + prometheus_escape(s.backend) + "\",generation=\"" +
                             std::to_string(s.generation) + "\"";
  std::string out;
  for (const auto& f : fields) {
    append_header(out, f.metric, f.help, f.type);
    out += f.metric;
    out += "{" + labels + "} " + std::to_string(s.*f.member) + "\n";
  }
  append_header(out, "uma_failures_total", "Failed requests by error code.", metric_type::counter);
  for (std::size_t i = 1; i < errc_slots; ++i) {
    out += "uma_failures_total{" + labels + ",code=\"";
    out += to_string(static_cast<errc>(i));
    out += "\"} " + std::to_string(s.failures[i]) + "\n";
  }
  return out;
}

}  // namespace uma::cli
