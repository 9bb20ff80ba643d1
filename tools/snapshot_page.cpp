#include "tools/snapshot_page.hpp"

#include <boost/json/serialize.hpp>

#include "tools/snapshot_json.hpp"

namespace uma::cli {

namespace {

constexpr std::string_view page_head = R"page(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>uma snapshot</title>
<style>
body{font:14px system-ui,sans-serif;margin:24px;color:#1d2330;background:#fafbfc}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px}
#summary{color:#4a5366;margin-bottom:8px} .card{background:#fff;border:1px solid #dde2ea;
border-radius:6px;padding:12px} table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:4px 8px;border-bottom:1px solid #eef0f4;text-align:left}
th{cursor:pointer;user-select:none;background:#f2f4f8} th.sorted::after{content:" \25BE"}
th.sorted.asc::after{content:" \25B4"} td.num{text-align:right;font-variant-numeric:tabular-nums}
#filter{padding:4px 8px;width:280px;margin-bottom:8px} .legend span{display:inline-block;
margin-right:14px} .swatch{display:inline-block;width:10px;height:10px;margin-right:4px}
svg text{font-size:11px;fill:#4a5366}
</style></head><body>
<h1>uma allocator snapshot</h1><div id="summary"></div>
<h2>Live bytes over time, by label</h2>
<div class="card"><svg id="chart" width="1100" height="300" role="img"></svg>
<div class="legend" id="legend"></div></div>
<h2>Regions</h2><input id="filter" type="search" placeholder="filter regions (any column)">
<div class="card"><table id="regions"><thead></thead><tbody></tbody></table></div>
)page";

/// Only in the page of a snapshot with "arbiter" (a serving node's arbiter, `uma snapshot
/// --connect`); the script fills it in.
constexpr std::string_view page_arbiter = R"page(<h2>Arbiter <span id="arbiter-note"></span></h2>
<div class="card"><div id="arbiter-devices" style="margin-bottom:8px"></div>
<table id="arbiter-members"><thead></thead><tbody></tbody></table></div>
<h2>Arbiter decisions <span id="decision-note"></span></h2>
<div class="card"><table id="arbiter-decisions"><thead></thead><tbody></tbody></table></div>
)page";

constexpr std::string_view page_events = R"page(<h2>Events <span id="event-note"></span></h2>
<div class="card"><table id="events"><thead></thead><tbody></tbody></table></div>
<script type="application/json" id="snapshot-data">)page";

constexpr std::string_view page_script_data = R"page(</script>
<script>
"use strict";
const snap = JSON.parse(document.getElementById("snapshot-data").textContent);
const NS = "http://www.w3.org/2000/svg";
const colors = ["#4e79a7","#f28e2b","#59a14f","#e15759","#76b7b2","#edc948","#b07aa1",
                "#ff9da7","#9c755f","#bab0ac"];
function fmtBytes(n) {
  const u = ["B","KiB","MiB","GiB","TiB"]; let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; ++i; }
  return (i ? n.toFixed(1) : String(n)) + " " + u[i];
}
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function svg(tag, attrs) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}
function summary() {
  const s = snap.stats, when = new Date(snap.taken_at_ns / 1e6).toISOString();
  document.getElementById("summary").textContent =
    (snap.server ? "server " + snap.server + " \u00b7 " : "") + "taken " + when + " \u00b7 backend " +
    snap.backend + " \u00b7 generation " + snap.generation + " \u00b7 " + s.live_regions +
    " live regions, " + fmtBytes(s.live_bytes) + " live, peak " + fmtBytes(s.peak_bytes) +
    " \u00b7 " + snap.events.length + " events (" + snap.events_dropped + " dropped, capacity " +
    snap.event_capacity + ")";
}
)page";

constexpr std::string_view page_script_chart = R"page(
function series() {
  const labels = [], live = {}, points = [];
  for (const e of snap.events) {
    if (e.kind !== "allocate" && e.kind !== "release") continue;
    const l = e.label || "(no label)";
    if (!(l in live)) { live[l] = 0; labels.push(l); }
    live[l] = Math.max(0, live[l] + (e.kind === "allocate" ? e.bytes : -e.bytes));
    points.push({t: e.time_ns, v: Object.assign({}, live)});
  }
  if (points.length) points.push({t: snap.taken_at_ns, v: Object.assign({}, live)});
  return {labels, points};
}
function area(points, x, y, top, base) {
  let d = "";
  points.forEach((p, i) => {
    d += (i ? "L" : "M") + x(p.t).toFixed(1) + "," + y(top[i]).toFixed(1);
    if (i + 1 < points.length) d += "L" + x(points[i + 1].t).toFixed(1) + "," + y(top[i]).toFixed(1);
  });
  for (let i = points.length - 1; i >= 0; --i) {
    if (i + 1 < points.length) d += "L" + x(points[i + 1].t).toFixed(1) + "," + y(base[i]).toFixed(1);
    d += "L" + x(points[i].t).toFixed(1) + "," + y(base[i]).toFixed(1);
  }
  return d + "Z";
}
function drawChart() {
  const chart = document.getElementById("chart"), W = 1100, H = 300, L = 70, B = 24;
  const {labels, points} = series();
  if (!points.length) {
    const t = svg("text", {x: L, y: H / 2}); t.textContent = "no allocations in the history";
    chart.appendChild(t); return;
  }
  const t0 = points[0].t, t1 = Math.max(points[points.length - 1].t, t0 + 1);
  let max = 1;
  for (const p of points) {
    let sum = 0; for (const l of labels) sum += p.v[l] || 0; max = Math.max(max, sum);
  }
  const x = t => L + (W - L - 10) * (t - t0) / (t1 - t0);
  const y = v => H - B - (H - B - 10) * v / max;
  const base = points.map(() => 0);
  labels.forEach((l, k) => {
    const top = points.map((p, i) => base[i] + (p.v[l] || 0));
    const path = svg("path", {d: area(points, x, y, top, base), fill: colors[k % colors.length],
                              "fill-opacity": 0.85, "data-label": l});
    const tip = svg("title", {}); tip.textContent = l; path.appendChild(tip);
    chart.appendChild(path);
    top.forEach((v, i) => { base[i] = v; });
    const item = el("span"), sw = el("span", undefined, "swatch");
    sw.style.background = colors[k % colors.length];
    item.appendChild(sw); item.appendChild(document.createTextNode(l));
    document.getElementById("legend").appendChild(item);
  });
  chart.appendChild(svg("line", {x1: L, y1: H - B, x2: W - 10, y2: H - B, stroke: "#99a"}));
  chart.appendChild(svg("line", {x1: L, y1: 10, x2: L, y2: H - B, stroke: "#99a"}));
  const span = ((t1 - t0) / 1e6).toFixed(1) + " ms";
  const ticks = [[L - 6, y(max) + 4, fmtBytes(max), "end"], [L - 6, H - B, "0", "end"],
                 [L, H - 6, "0 ms", "start"], [W - 10, H - 6, span, "end"]];
  for (const [tx, ty, text, anchor] of ticks) {
    const t = svg("text", {x: tx, y: ty, "text-anchor": anchor}); t.textContent = text;
    chart.appendChild(t);
  }
}
)page";

constexpr std::string_view page_script_arbiter = R"page(
// The arbiter's devices, members (one row per member and device) and its ledger's decisions.
function arbiter(a) {
  document.getElementById("arbiter-note").textContent = "(" + a.members + " member(s), " +
    a.revocations + " revocation(s))";
  for (const d of a.devices)
    document.getElementById("arbiter-devices").appendChild(el("div", "device " + d.device + ": " +
      fmtBytes(d.total_bytes) + " shared, " + fmtBytes(d.held_bytes) + " held, " +
      d.members.length + " member(s)"));
  const members = a.devices.flatMap(d => d.members.map(m => Object.assign({device: d.device}, m)));
  table("arbiter-members", [["member", "member", null, true], ["device", "device", null, true],
    ["tenant", "tenant"], ["state", "state"], ["granted_bytes", "granted", fmtBytes, true],
    ["held_bytes", "held", fmtBytes, true], ["resident_bytes", "resident", fmtBytes, true],
    ["min_bytes", "min", fmtBytes, true], ["wanted_bytes", "wanted", fmtBytes, true],
    ["priority", "priority", null, true], ["weight", "weight", null, true],
    ["shrinks", "shrinks", null, true], ["slowest_shrink_ms", "slowest shrink (ms)", null, true]],
    members, null);
  // A policy changes no bytes by itself: its row shows no change.
  const decisions = a.decisions.map(d => Object.assign({change: d.from_bytes === d.to_bytes ?
    "\u2014" : fmtBytes(d.from_bytes) + " \u2192 " + fmtBytes(d.to_bytes)}, d));
  // Member 0: the operator's decision (a policy, a total).
  table("arbiter-decisions", [["at_ms", "at (ms)", null, true],
    ["member", "member", m => m === 0 ? "operator" : m, true],
    ["tenant", "tenant"], ["device", "device", null, true], ["change", "bytes"], ["why", "why"]],
    decisions, null);
  document.getElementById("decision-note").textContent = "(the ledger, oldest first; " +
    a.decisions.length + " kept)";
}
)page";

constexpr std::string_view page_script_tables = R"page(
function table(id, columns, rows, filterBox) {
  const tbl = document.getElementById(id), head = tbl.tHead, body = tbl.tBodies[0];
  const hr = head.insertRow();
  let key = columns[0][0], asc = true;
  function render() {
    const q = filterBox ? filterBox.value.toLowerCase() : "";
    const shown = rows.filter(r => !q || columns.some(([k]) =>
      String(r[k] ?? "").toLowerCase().includes(q)));
    shown.sort((a, b) => {
      const u = a[key] ?? "", v = b[key] ?? "";
      const c = typeof u === "number" && typeof v === "number" ? u - v
                                                               : String(u).localeCompare(String(v));
      return asc ? c : -c;
    });
    body.replaceChildren();
    for (const r of shown) {
      const tr = body.insertRow();
      for (const [k, , fmt, num] of columns)
        tr.appendChild(el("td", fmt ? fmt(r[k]) : (r[k] ?? "\u2014"), num ? "num" : ""));
    }
    for (const th of hr.cells)
      th.className = th.dataset.key === key ? "sorted" + (asc ? " asc" : "") : "";
  }
  for (const [k, title] of columns) {
    const th = el("th", title); th.dataset.key = k;
    th.addEventListener("click", () => { asc = key === k ? !asc : true; key = k; render(); });
    hr.appendChild(th);
  }
  if (filterBox) filterBox.addEventListener("input", render);
  render();
}
summary();
drawChart();
const regionColumns = [["id", "id", null, true], ["generation", "gen", null, true],
  ["label", "label"], ["bytes", "bytes", fmtBytes, true], ["policy", "policy"],
  ["attach", "attach"], ["advice", "advice"], ["last_prefetch", "last prefetch"],
  ["refs", "refs", null, true], ["pins", "pins", null, true], ["age_ms", "age (ms)", null, true]];
// A serving node's snapshot names the session leasing each region (0: not leased).
if (snap.regions.some(r => "session" in r))
  regionColumns.splice(3, 0, ["session", "session", null, true]);
table("regions", regionColumns, snap.regions, document.getElementById("filter"));
const first = snap.events.length ? snap.events[0].time_ns : 0;
const events = snap.events.map((e, i) =>
  Object.assign({seq: i, at_ms: +((e.time_ns - first) / 1e6).toFixed(3)}, e));
table("events", [["seq", "#", null, true], ["at_ms", "at (ms)", null, true], ["kind", "kind"],
  ["generation", "gen", null, true], ["region", "region", null, true],
  ["bytes", "bytes", fmtBytes, true], ["label", "label"], ["detail", "detail"]], events, null);
document.getElementById("event-note").textContent = "(oldest first; " + snap.events_dropped +
  " older ones dropped)";
if (snap.arbiter) arbiter(snap.arbiter);
</script></body></html>
)page";

}  // namespace

std::string script_safe(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (const char c : json) {
    if (c == '<')
      out.append("\\u003c");
    else if (c == '>')
      out.append("\\u003e");
    else if (c == '&')
      out.append("\\u0026");
    else
      out.push_back(c);
  }
  return out;
}

std::string snapshot_page(const boost::json::object& data) {
  std::string out(page_head);
  if (data.contains("arbiter"))
    out.append(page_arbiter);
  out.append(page_events).append(script_safe(boost::json::serialize(data)));
  out.append(page_script_data).append(page_script_chart).append(page_script_arbiter);
  out.append(page_script_tables);
  return out;
}

std::string snapshot_page(const allocator_snapshot& s) {
  return snapshot_page(to_json_object(s));
}

}  // namespace uma::cli
