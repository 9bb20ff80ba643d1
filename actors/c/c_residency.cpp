// The residency report in the C ABI's two forms (actors/c/uma.h): the struct that can grow and
// the JSON of uma_residency_json (docs/c_abi.md "Residency").

#include <uma/actors/c/c_plans.hpp>

#include <algorithm>
#include <iterator>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <uma/memory/residency_json.hpp>

namespace uma::c {

namespace {

uma_device_residency device_of(const device_residency& d) noexcept {
  return {d.memory, d.budget, d.resident, d.peak, d.held};
}

using object = boost::json::object;

}  // namespace

uma_residency_report report_of(const residency_report& r) noexcept {
  uma_residency_report out{};
  out.device_count = static_cast<std::uint32_t>(r.devices.size());
  const auto filled = std::min(r.devices.size(), std::size(out.devices));
  for (std::size_t d = 0; d < filled; ++d)
    out.devices[d] = device_of(r.devices[d]);
  out.to_device_bytes = r.totals.to_device_bytes;
  out.to_host_bytes = r.totals.to_host_bytes;
  out.dropped_bytes = r.totals.dropped_bytes;
  out.discarded_bytes = r.totals.discarded_bytes;
  out.placements = r.totals.placements;
  out.evictions = r.totals.evictions;
  out.refetches = r.totals.refetches;
  out.driver_counters_on = r.driver_counters_on ? 1 : 0;
  out.driver_to_device_bytes = r.driver_totals.to_device_bytes;
  out.driver_to_host_bytes = r.driver_totals.to_host_bytes;
  out.driver_page_faults = r.driver_totals.cpu_page_faults + r.driver_totals.gpu_page_faults;
  out.unplanned_bytes = r.unplanned_bytes;
  const auto& d = r.driver_totals;
  out.driver_fault_to_device_bytes = d.to_device_bytes - d.prefetched_to_device_bytes;
  out.driver_fault_to_host_bytes = d.to_host_bytes - d.prefetched_to_host_bytes;
  out.copy_to_device_bytes = r.copies.to_device_bytes;
  out.copy_to_host_bytes = r.copies.to_host_bytes;
  return out;
}

std::string report_json(const residency_report& r) {
  boost::json::array devices;
  for (const auto& d : r.devices)
    devices.push_back(device_residency_json<object>(d));
  boost::json::array labels;
  for (const auto& l : r.labels)
    labels.push_back({{"label", l.label},
                      {"moves", residency_ledger_json<object>(l.moves)},
                      {"driver", driver_ledger_json<object>(l.driver)}});
  boost::json::array tenants;
  for (const auto& t : r.tenants) {
    boost::json::array per_device;
    for (const auto& d : t.devices)
      per_device.push_back(device_residency_json<object>(d));
    tenants.push_back({{"tenant", t.tenant}, {"devices", std::move(per_device)}});
  }
  const boost::json::object out{
      {"devices", std::move(devices)},
      {"totals", residency_ledger_json<object>(r.totals)},
      {"moves", r.moves},
      {"driver_counters_on", r.driver_counters_on},
      {"driver_counters", r.driver_counters},
      {"driver_totals", driver_ledger_json<object>(r.driver_totals)},
      {"driver_unattributed", driver_ledger_json<object>(r.driver_unattributed)},
      {"driver_records_dropped", r.driver_records_dropped},
      {"labels", std::move(labels)},
      {"tenants", std::move(tenants)},
      {"unplanned_bytes", r.unplanned_bytes},
      {"copies",
       {{"to_device_bytes", r.copies.to_device_bytes},
        {"to_host_bytes", r.copies.to_host_bytes},
        {"other_bytes", r.copies.other_bytes},
        {"copies", r.copies.copies}}}};
  return boost::json::serialize(out);
}

}  // namespace uma::c
