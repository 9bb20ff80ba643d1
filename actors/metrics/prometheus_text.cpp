#include <uma/actors/metrics/prometheus_text.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <initializer_list>
#include <iterator>
#include <map>
#include <string>
#include <type_traits>
#include <utility>

#include <uma/memory/stats_fields.hpp>

namespace uma {

namespace {

enum class metric_type : std::uint8_t { gauge, counter };

class sample_sink;
using sample_fn = void (*)(const metrics_snapshot&, sample_sink&);

/// One metric family beyond the `allocator_stats` fields (those come from their table,
/// memory/stats_fields.hpp): a function adds its samples (none when the snapshot lacks what it
/// needs).
struct family {
  std::string_view name;
  metric_type type;
  std::string_view help;
  sample_fn samples = nullptr;
};

/// Writes one family's samples; its HELP and TYPE lines go out with the first sample only, so a
/// family without samples leaves no trace.
class sample_sink {
 public:
  sample_sink(std::string& out, const family& f, const std::string& base_labels)
      : out_(out), family_(f), base_(base_labels) {}

  /// A sample with the base labels only.
  void add(std::uint64_t value) { add({}, {}, value); }

  /// A sample with one label beyond the base ones (none when `label` is empty).
  void add(std::string_view label, std::string_view label_value, std::uint64_t value) {
    add(label, label_value, {}, {}, value);
  }

  /// A sample with up to two labels beyond the base ones (an empty name: no label).
  void add(std::string_view label, std::string_view label_value, std::string_view label2,
           std::string_view label2_value, std::uint64_t value) {
    write(label, label_value, label2, label2_value, std::to_string(value));
  }

  /// A sample of a real value (a ratio) with the base labels only.
  void add_real(double value) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, value).ptr;
    write({}, {}, {}, {}, std::string_view(text, static_cast<std::size_t>(end - text)));
  }

 private:
  void write(std::string_view label, std::string_view label_value, std::string_view label2,
             std::string_view label2_value, std::string_view value) {
    if (!header_written_)
      write_header();
    out_.append(family_.name).append("{").append(base_);
    if (!label.empty())
      out_.append(",").append(label).append("=\"").append(prometheus_escape(label_value)) += '"';
    if (!label2.empty())
      out_.append(",").append(label2).append("=\"").append(prometheus_escape(label2_value)) += '"';
    out_.append("} ").append(value) += '\n';
  }

  void write_header() {
    header_written_ = true;
    out_.append("# HELP ").append(family_.name) += ' ';
    for (const char c : family_.help)  // HELP text escapes backslash and newline only
      out_.append(c == '\\' ? "\\\\" : c == '\n' ? "\\n" : std::string(1, c));
    out_.append("\n# TYPE ").append(family_.name);
    out_.append(family_.type == metric_type::counter ? " counter\n" : " gauge\n");
  }

  std::string& out_;
  const family& family_;
  const std::string& base_;
  bool header_written_ = false;
};

/// The families of the `allocator_stats` fields, from their table, in its order: identity fields
/// are the base labels, the failures one family with a sample per error code (zeros included).
void stats_families(const allocator_stats& s, std::string& out, const std::string& base) {
  for_each_stats_field([&](const auto& f) {
    using type = stats_field_type<decltype(f)>;
    if (f.kind == stat_kind::identity)
      return;
    const family fam{
        f.metric, f.kind == stat_kind::counter ? metric_type::counter : metric_type::gauge, f.help};
    sample_sink sink(out, fam, base);
    const auto& value = s.*f.member;
    if constexpr (std::is_same_v<type, std::uint64_t>)
      sink.add(value);
    else if constexpr (std::is_same_v<type, double>)
      sink.add_real(value);
    else if constexpr (std::is_same_v<type, std::array<std::uint64_t, errc_slots>>)
      for (std::size_t i = 1; i < errc_slots; ++i)
        sink.add("code", to_string(static_cast<errc>(i)), value[i]);
  });
}

void label_regions(const metrics_snapshot& s, sample_sink& sink) {
  if (s.labels)
    for (const auto& l : *s.labels)
      sink.add("label", l.label, l.regions);
}

void label_bytes(const metrics_snapshot& s, sample_sink& sink) {
  if (s.labels)
    for (const auto& l : *s.labels)
      sink.add("label", l.label, l.bytes);
}

void restarts(const metrics_snapshot& s, sample_sink& sink) {
  if (s.supervision)
    sink.add(s.supervision->restarts);
}

void resumes(const metrics_snapshot& s, sample_sink& sink) {
  if (s.supervision)
    sink.add(s.supervision->resumes);
}

void leaked(const metrics_snapshot& s, sample_sink& sink) {
  if (!s.supervision)
    return;
  std::uint64_t total = 0;
  for (const auto& g : s.supervision->generations)
    total += g.regions_leaked;
  sink.add(total);
}

void state(const metrics_snapshot& s, sample_sink& sink) {
  if (!s.supervision)
    return;
  for (const auto st :
       {supervisor_state::running, supervisor_state::restarting, supervisor_state::stopped})
    sink.add("state", to_string(st), s.supervision->state == st ? 1 : 0);
}

/// A per-device residency gauge (docs/residency.md), labelled `device`.
template <std::size_t device_residency::*Field>
void per_device(const metrics_snapshot& s, sample_sink& sink) {
  if (s.residency)
    for (std::size_t d = 0; d < s.residency->devices.size(); ++d)
      sink.add("device", std::to_string(d), s.residency->devices[d].*Field);
}

/// Samples of the residency ledger (summed over every region), one per `label` value.
void ledger_samples(
    const metrics_snapshot& s, sample_sink& sink, std::string_view label,
    std::initializer_list<std::pair<std::string_view, std::uint64_t residency_ledger::*>> fields) {
  if (s.residency)
    for (const auto& [value, field] : fields)
      sink.add(label, value, s.residency->totals.*field);
}

void residency_bytes(const metrics_snapshot& s, sample_sink& sink) {
  using rl = residency_ledger;
  ledger_samples(s, sink, "move",
                 {{"to_device", &rl::to_device_bytes},
                  {"to_host", &rl::to_host_bytes},
                  {"dropped", &rl::dropped_bytes},
                  {"discarded", &rl::discarded_bytes}});
}

void residency_moves(const metrics_snapshot& s, sample_sink& sink) {
  using rl = residency_ledger;
  ledger_samples(
      s, sink, "kind",
      {{"placement", &rl::placements}, {"eviction", &rl::evictions}, {"refetch", &rl::refetches}});
}

// -- the migration ledger's driver half (docs/residency.md) --------------------------------------

void driver_on(const metrics_snapshot& s, sample_sink& sink) {
  if (s.residency)
    sink.add(s.residency->driver_counters_on ? 1 : 0);
}

/// The residency report while the driver's counters feed it; null otherwise (no samples).
const residency_report* with_driver(const metrics_snapshot& s) noexcept {
  return s.residency && s.residency->driver_counters_on ? &*s.residency : nullptr;
}

void driver_bytes(const metrics_snapshot& s, sample_sink& sink) {
  const auto* r = with_driver(s);
  if (r == nullptr)
    return;
  const auto& t = r->driver_totals;
  sink.add("direction", "to_device", "cause", "prefetch", t.prefetched_to_device_bytes);
  sink.add("direction", "to_device", "cause", "driver",
           t.to_device_bytes - t.prefetched_to_device_bytes);
  sink.add("direction", "to_host", "cause", "prefetch", t.prefetched_to_host_bytes);
  sink.add("direction", "to_host", "cause", "driver", t.to_host_bytes - t.prefetched_to_host_bytes);
}

/// Two samples, each labelled `label`="`value`" (no such label when empty) and `key`= its name.
void pair_of(sample_sink& sink, std::string_view label, std::string_view value,
             std::string_view key, std::pair<std::string_view, std::uint64_t> first,
             std::pair<std::string_view, std::uint64_t> second) {
  sink.add(label, value, key, first.first, first.second);
  sink.add(label, value, key, second.first, second.second);
}

void driver_faults(const metrics_snapshot& s, sample_sink& sink) {
  if (const auto* r = with_driver(s))
    pair_of(sink, {}, {}, "processor", {"cpu", r->driver_totals.cpu_page_faults},
            {"gpu", r->driver_totals.gpu_page_faults});
}

template <std::uint64_t driver_ledger::*Field>
void driver_total(const metrics_snapshot& s, sample_sink& sink) {
  if (const auto* r = with_driver(s))
    sink.add(r->driver_totals.*Field);
}

void driver_unattributed(const metrics_snapshot& s, sample_sink& sink) {
  if (const auto* r = with_driver(s))
    pair_of(sink, {}, {}, "direction", {"to_device", r->driver_unattributed.to_device_bytes},
            {"to_host", r->driver_unattributed.to_host_bytes});
}

void driver_dropped(const metrics_snapshot& s, sample_sink& sink) {
  if (const auto* r = with_driver(s))
    sink.add(r->driver_records_dropped);
}

void label_moves(const metrics_snapshot& s, sample_sink& sink) {
  if (!s.residency)
    return;
  for (const auto& l : s.residency->labels) {
    pair_of(sink, "label", l.label, "move", {"to_device", l.moves.to_device_bytes},
            {"to_host", l.moves.to_host_bytes});
    pair_of(sink, "label", l.label, "move", {"dropped", l.moves.dropped_bytes},
            {"discarded", l.moves.discarded_bytes});
  }
}

void label_driver_bytes(const metrics_snapshot& s, sample_sink& sink) {
  if (const auto* r = with_driver(s))
    for (const auto& l : r->labels)
      pair_of(sink, "label", l.label, "direction", {"to_device", l.driver.to_device_bytes},
              {"to_host", l.driver.to_host_bytes});
}

void label_driver_faults(const metrics_snapshot& s, sample_sink& sink) {
  if (const auto* r = with_driver(s))
    for (const auto& l : r->labels)
      pair_of(sink, "label", l.label, "processor", {"cpu", l.driver.cpu_page_faults},
              {"gpu", l.driver.gpu_page_faults});
}

/// A per-tenant, per-device residency gauge: the first 100 tenants (sorted), so that a tenant per
/// session cannot blow up a time series database.
template <std::size_t device_residency::*Field>
void per_tenant(const metrics_snapshot& s, sample_sink& sink) {
  if (!s.residency)
    return;
  const auto& tenants = s.residency->tenants;
  for (std::size_t t = 0; t < tenants.size() && t < max_metric_labels; ++t)
    for (std::size_t d = 0; d < tenants[t].devices.size(); ++d)
      sink.add("tenant", tenants[t].tenant, "device", std::to_string(d),
               tenants[t].devices[d].*Field);
}

using dl = driver_ledger;
using dr = device_residency;
constexpr auto gauge = metric_type::gauge;
constexpr auto counter = metric_type::counter;

// The families after the `allocator_stats` ones, in the order they are written. docs/cli.md
// lists them; change both together.
constexpr std::array families{
    family{"uma_label_live_regions", gauge, "Live regions by the label given at allocation.",
           label_regions},
    family{"uma_label_live_bytes", gauge, "Live bytes by the label given at allocation.",
           label_bytes},
    family{"uma_supervisor_restarts_total", counter,
           "Allocator incarnations the supervisor replaced after a failure.", restarts},
    family{"uma_supervisor_resumes_total", counter,
           "Failures the allocator absorbed by itself (replied, kept going).", resumes},
    family{"uma_supervisor_leaked_regions_total", counter,
           "Regions that ended incarnations could not free.", leaked},
    family{"uma_supervisor_state", gauge,
           "The supervisor's state: 1 for the current one, 0 for the others.", state},
    family{"uma_residency_budget_bytes", gauge, "Residency budget of the device (0: none).",
           per_device<&dr::budget>},
    family{"uma_residency_resident_bytes", gauge,
           "Bytes uma placed on the device (read-mostly copies included).",
           per_device<&dr::resident>},
    family{"uma_residency_peak_bytes", gauge, "Highest resident bytes so far.",
           per_device<&dr::peak>},
    family{"uma_residency_held_bytes", gauge, "Resident bytes held by access plans.",
           per_device<&dr::held>},
    family{"uma_residency_tenant_budget_bytes", gauge,
           "Residency budget of a tenant on the device (0: none).", per_tenant<&dr::budget>},
    family{"uma_residency_tenant_resident_bytes", gauge,
           "Bytes of a tenant's regions uma placed on the device.", per_tenant<&dr::resident>},
    family{"uma_residency_bytes_total", counter,
           "Residency bytes by move: to_device, to_host (evictions), dropped (read-mostly "
           "copies) and discarded (dead or scratch contents); only the first two cross the link.",
           residency_bytes},
    family{"uma_residency_moves_total", counter,
           "Residency placements, evictions and refetches (placed again after an eviction with "
           "no use in between: thrashing).",
           residency_moves},
    family{"uma_residency_label_bytes_total", counter,
           "Residency bytes by label (of each region's first plan) and move, as "
           "uma_residency_bytes_total.",
           label_moves},
    family{"uma_residency_driver_counters", gauge,
           "1 when the driver's unified-memory counters (CUPTI) feed the ledger, else 0.",
           driver_on},
    family{"uma_residency_driver_bytes_total", counter,
           "Bytes the driver migrated, by direction and cause: prefetch (an explicit prefetch "
           "asked for it) or driver (faults, evictions, its own speculation).",
           driver_bytes},
    family{"uma_residency_driver_faults_total", counter,
           "Unified-memory page faults the driver counted: cpu faults, gpu fault groups.",
           driver_faults},
    family{"uma_residency_driver_thrashing_bytes_total", counter,
           "Bytes the driver saw thrash between processors.", driver_total<&dl::thrashing_bytes>},
    family{"uma_residency_driver_remote_map_bytes_total", counter,
           "Bytes the driver mapped remotely instead of migrating them.",
           driver_total<&dl::remote_map_bytes>},
    family{"uma_residency_driver_unattributed_bytes_total", counter,
           "Driver migrations at addresses no live region of this allocator held.",
           driver_unattributed},
    family{"uma_residency_driver_dropped_records_total", counter,
           "Driver records lost (the driver's drops, and records past the subscription's bound).",
           driver_dropped},
    family{"uma_residency_label_driver_bytes_total", counter,
           "Bytes the driver migrated in regions of each label, by direction.", label_driver_bytes},
    family{"uma_residency_label_driver_faults_total", counter,
           "Page faults the driver counted in regions of each label, by processor.",
           label_driver_faults},
};

}  // namespace

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

std::string to_prometheus(const metrics_snapshot& s) {
  const std::string base = "backend=\"" + prometheus_escape(s.allocator.backend) +
                           "\",generation=\"" + std::to_string(s.allocator.generation) + "\"";
  std::string out;
  out.reserve(4096);
  stats_families(s.allocator, out, base);
  for (const auto& f : families) {
    sample_sink sink(out, f, base);
    f.samples(s, sink);
  }
  return out;
}

std::string to_prometheus(const allocator_stats& s) {
  return to_prometheus(metrics_snapshot{.allocator = s});
}

std::vector<label_usage> usage_by_label(const std::vector<region_info>& regions,
                                        std::size_t max_labels) {
  std::map<std::string_view, label_usage> by_label;
  for (const auto& r : regions) {
    auto& u = by_label[r.label];
    ++u.regions;
    u.bytes += r.bytes;
  }
  return fold_labels(by_label, max_labels, [](label_usage& other, const label_usage& u) {
    other.regions += u.regions;
    other.bytes += u.bytes;
  });
}

}  // namespace uma
