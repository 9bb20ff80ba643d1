#include "bench/bench_report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <ostream>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value_from.hpp>

#include "tools/json_print.hpp"

namespace uma::bench {

namespace {

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width)
    s.append(width - s.size(), ' ');
  return s;
}

boost::json::value json_number(double v) {
  if (!std::isfinite(v))
    return nullptr;
  return v;
}

boost::json::object json_figure(const figure& f) {
  return {{"name", f.name},
          {"value", json_number(f.value)},
          {"unit", f.unit},
          {"baseline", f.baseline},
          {"baseline_value", json_number(f.baseline_value)},
          {"ratio", json_number(f.ratio())},
          {"note", f.note}};
}

boost::json::object json_summary(const summary& s) {
  return {{"samples", s.n},
          {"min_ns", json_number(s.min)},
          {"median_ns", json_number(s.median)},
          {"p99_ns", json_number(s.p99)},
          {"max_ns", json_number(s.max)},
          {"mean_ns", json_number(s.mean)}};
}

std::string value_text(double v, const std::string& unit) {
  if (!std::isfinite(v))
    return "-";
  if (unit == "count")
    return format("%.0f", v);
  return number_text(v) + (unit.empty() ? "" : " " + unit);
}

std::string ratio_text(double r) {
  return std::isfinite(r) ? format("%.3f", r) : "-";
}

template <class T>
std::vector<std::string> variants_of(const std::vector<T>& points) {
  std::vector<std::string> out;
  for (const auto& p : points)
    if (std::find(out.begin(), out.end(), p.variant) == out.end())
      out.push_back(p.variant);
  return out;
}

}  // namespace

summary summarize(std::vector<double> samples) {
  summary s;
  s.n = samples.size();
  if (samples.empty())
    return s;
  std::sort(samples.begin(), samples.end());
  const auto rank = [&](double q) {
    const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(s.n)));
    return samples[std::min(s.n - 1, k == 0 ? 0 : k - 1)];
  };
  s.min = samples.front();
  s.max = samples.back();
  s.median = s.n % 2 == 1 ? samples[s.n / 2] : (samples[s.n / 2 - 1] + samples[s.n / 2]) / 2;
  s.p99 = rank(0.99);
  double sum = 0;
  for (const double v : samples)
    sum += v;
  s.mean = sum / static_cast<double>(s.n);
  return s;
}

std::string size_text(std::size_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  return (v == std::floor(v) ? format("%.0f", v) : format("%.1f", v)) + " " + units[u];
}

std::string number_text(double v) {
  const double a = std::fabs(v);
  if (a >= 1e5)
    return format("%.0f", v);
  if (a >= 100)
    return format("%.1f", v);
  if (a >= 1)
    return format("%.2f", v);
  return format("%.3f", v);
}

void report::meta(std::string key, std::string value) {
  meta_.emplace_back(std::move(key), std::move(value));
}

void report::print_header() {
  out_ << "uma_bench\n";
  for (const auto& [k, v] : meta_)
    out_ << "  " << pad(k + ":", 24) << v << "\n";
  out_.flush();
}

section& report::begin(int id, std::string title) {
  auto& s = sections_.emplace_back();
  s.id = id;
  s.title = std::move(title);
  out_ << "\n== " << id << ". " << s.title << "\n";
  out_.flush();
  return s;
}

void report::print_block(const std::string& text) {
  out_ << text;
  out_.flush();
}

void report::end(section& s) {
  if (!s.figures.empty()) {
    std::size_t name_w = 6, value_w = 5, base_w = 19;
    for (const auto& f : s.figures) {
      name_w = std::max(name_w, f.name.size());
      value_w = std::max({value_w, value_text(f.value, f.unit).size(),
                          value_text(f.baseline_value, f.unit).size()});
      base_w = std::max(base_w, f.baseline.size());
    }
    name_w += 2;
    value_w += 2;
    base_w += 2;
    out_ << "  " << pad("figure", name_w) << pad("value", value_w)
         << pad("baseline (same run)", base_w) << pad("baseline", value_w) << "ratio\n";
    for (const auto& f : s.figures) {
      out_ << "  " << pad(f.name, name_w) << pad(value_text(f.value, f.unit), value_w)
           << pad(f.baseline.empty() ? "-" : f.baseline, base_w)
           << pad(value_text(f.baseline_value, f.unit), value_w) << ratio_text(f.ratio()) << "\n";
      if (!f.note.empty())
        out_ << "      (" << f.note << ")\n";
    }
  }
  for (const auto& n : s.notes)
    out_ << "  note: " << n << "\n";
  out_ << "  status: " << s.status << "\n";
  out_.flush();
}

void report::fail(const std::string& what) {
  failures_.push_back(what);
  out_ << "  FAILED: " << what << "\n";
  out_.flush();
}

void report::print_targets() {
  out_ << "\n== targets (set for the GPU machine; each with its same-run baseline)\n";
  if (targets_.empty()) {
    out_ << "  none measured in this run\n";
    out_.flush();
    return;
  }
  std::size_t name_w = 6, value_w = 5, goal_w = 4;
  for (const auto& t : targets_) {
    name_w = std::max(name_w, t.fig.name.size());
    value_w = std::max(value_w, value_text(t.fig.value, t.fig.unit).size());
    goal_w = std::max(goal_w, t.goal.size());
  }
  name_w += 2;
  value_w += 2;
  goal_w += 2;
  out_ << "  " << pad("sec", 5) << pad("figure", name_w) << pad("value", value_w)
       << pad("goal", goal_w) << pad("verdict", 9) << "baseline (same run)\n";
  for (const auto& t : targets_) {
    out_ << "  " << pad(std::to_string(t.section), 5) << pad(t.fig.name, name_w)
         << pad(value_text(t.fig.value, t.fig.unit), value_w) << pad(t.goal, goal_w)
         << pad(t.met ? "met" : "MISSED", 9);
    if (t.fig.baseline.empty())
      out_ << "-";
    else
      out_ << t.fig.baseline << " = " << value_text(t.fig.baseline_value, t.fig.unit) << " (ratio "
           << ratio_text(t.fig.ratio()) << ")";
    out_ << "\n";
  }
  out_.flush();
}

std::string report::json() const {
  boost::json::object meta;
  for (const auto& [k, v] : meta_)
    meta[k] = v;
  boost::json::array sections;
  for (const auto& s : sections_) {
    boost::json::array figures;
    for (const auto& f : s.figures)
      figures.emplace_back(json_figure(f));
    sections.emplace_back(boost::json::object{{"id", s.id},
                                              {"title", s.title},
                                              {"status", s.status},
                                              {"figures", std::move(figures)},
                                              {"notes", boost::json::value_from(s.notes)}});
  }
  boost::json::array targets;
  for (const auto& t : targets_)
    targets.emplace_back(boost::json::object{
        {"section", t.section}, {"goal", t.goal}, {"met", t.met}, {"figure", json_figure(t.fig)}});
  boost::json::array latency;
  for (const auto& p : latency_) {
    boost::json::object point{{"variant", p.variant}, {"bytes", p.bytes}};
    for (auto& kv : json_summary(p.s))
      point.emplace(kv.key(), std::move(kv.value()));
    latency.emplace_back(std::move(point));
  }
  boost::json::array throughput;
  for (const auto& p : throughput_)
    throughput.emplace_back(
        boost::json::object{{"variant", p.variant},
                            {"clients", p.clients},
                            {"pairs_per_second", json_number(p.pairs_per_second)},
                            {"pairs", p.pairs},
                            {"seconds", json_number(p.seconds)}});
  const boost::json::object run{
      {"meta", std::move(meta)},
      {"sections", std::move(sections)},
      {"targets", std::move(targets)},
      {"curves", boost::json::object{{"alloc_latency", std::move(latency)},
                                     {"throughput", std::move(throughput)}}},
      {"failures", boost::json::value_from(failures_)}};
  return cli::pretty_json(run, SIZE_MAX, true);  // figures and curve points one per line
}

std::string report::plot_data() const {
  std::string d =
      "# uma_bench plot data (bench/plot.gp). index 0: allocate+release latency, "
      "us, per block size; index 1: allocate+release pairs per second per client "
      "count. NaN: not measured.\n";
  const auto quoted = [](const std::string& s) { return " \"" + s + "\""; };
  {
    const auto variants = variants_of(latency_);
    std::map<std::size_t, std::map<std::string, const latency_point*>> rows;
    for (const auto& p : latency_)
      rows[p.bytes][p.variant] = &p;
    d += "bytes";
    for (const auto& v : variants)
      d += quoted(v + " median") + quoted(v + " p99");
    d += "\n";
    for (const auto& [bytes, by_variant] : rows) {
      d += std::to_string(bytes);
      for (const auto& v : variants) {
        const auto it = by_variant.find(v);
        const bool have = it != by_variant.end() && it->second->s.n > 0;
        d += ' ';
        d += have ? format("%.4f", it->second->s.median / 1e3) : std::string("NaN");
        d += ' ';
        d += have ? format("%.4f", it->second->s.p99 / 1e3) : std::string("NaN");
      }
      d += "\n";
    }
  }
  d += "\n\n";
  {
    const auto variants = variants_of(throughput_);
    std::map<int, std::map<std::string, double>> rows;
    for (const auto& p : throughput_)
      rows[p.clients][p.variant] = p.pairs_per_second;
    d += "clients";
    for (const auto& v : variants)
      d += quoted(v);
    d += "\n";
    for (const auto& [clients, by_variant] : rows) {
      d += std::to_string(clients);
      for (const auto& v : variants) {
        const auto it = by_variant.find(v);
        d += ' ';
        d += it != by_variant.end() ? format("%.1f", it->second) : std::string("NaN");
      }
      d += "\n";
    }
  }
  return d;
}

}  // namespace uma::bench
