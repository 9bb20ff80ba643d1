#include <uma/actors/detail/residency_core.hpp>

#include <string>
#include <unordered_set>
#include <utility>

#include <uma/memory/advice_ops.hpp>
#include <uma/sys/log.hpp>

namespace uma::detail {

namespace {

/// A lane job that logs what the runtime refused instead of throwing on the lane's thread: the
/// plan's reply went out when the moves were queued, and the account stays what it decided.
template <class F>
std::function<void()> logged(const char* what, F f) {
  return [what, f = std::move(f)]() mutable {
    try {
      f();
    } catch (const std::exception& e) {
      log(log_level::warning, std::string("residency: ") + what + " failed: " + e.what());
    }
  };
}

}  // namespace

residency_core::residency_core(const allocator_config& config, std::shared_ptr<backend> backend,
                               worker_lanes& lanes, const region_table& table)
    : backend_(std::move(backend)),
      lanes_(lanes),
      table_(table),
      counted_only_(backend_->kind() == backend_kind::host),
      account_(devices_of(config, *backend_)) {
  for (const auto& [device, bytes] : config.device_budgets)
    account_.set_budget(device, bytes);
}

void residency_core::check(const allocator_config& config, const backend& b) {
  residency_account probe(devices_of(config, b));
  for (const auto& [device, bytes] : config.device_budgets)
    probe.set_budget(device, bytes);
}

std::vector<std::size_t> residency_core::devices_of(const allocator_config& config,
                                                    const backend& b) {
  if (b.kind() == backend_kind::host)
    return config.host_residency_devices;
  std::vector<std::size_t> out;
  for (int d = 0; d < b.device_count(); ++d)
    out.push_back(b.capabilities(d).total_memory);
  return out;
}

std::vector<planned_region> residency_core::regions_of(std::span<const byte_ref> refs,
                                                       residency_policy policy) const {
  std::vector<planned_region> out;
  std::unordered_set<std::uint64_t> seen;
  for (const auto& ref : refs) {
    const auto* home = record_of(ref)->home;
    if (table_.find(home->id) == nullptr)
      raise(errc::invalid_argument,
            "residency: region " + std::to_string(home->id) + " is not a live region here");
    if (seen.insert(home->id).second)
      out.push_back({home->id, home->bytes, policy});
  }
  return out;
}

residency_result residency_core::summarize(const residency_plan& plan) {
  residency_result out;
  const auto count = [&out](const residency_move& m) {
    switch (m.kind) {
      case residency_move_kind::to_device:
        out.to_device_bytes += m.bytes;
        break;
      case residency_move_kind::to_host:
        out.to_host_bytes += m.bytes;
        break;
      case residency_move_kind::drop_copy:
        out.dropped_bytes += m.bytes;
        break;
      case residency_move_kind::discard:
        out.discarded_bytes += m.bytes;
        break;
      case residency_move_kind::map_remote:
        out.mapped_bytes += m.bytes;
        break;
    }
  };
  for (const auto& m : plan.evictions)
    count(m);
  for (const auto& m : plan.placements)
    count(m);
  out.evictions = static_cast<std::uint32_t>(plan.evictions.size());
  out.placements = static_cast<std::uint32_t>(plan.placements.size());
  return out;
}

void residency_core::carry_out(const residency_plan& plan, stream_view stream) {
  if (counted_only_)
    return;
  const auto range_of = [this](std::uint64_t id) -> std::optional<byte_range> {
    const auto* e = table_.find(id);
    if (e == nullptr)
      return std::nullopt;
    return byte_range{e->region->data, e->region->bytes};
  };
  const location host = location::host();
  for (const auto& m : plan.evictions) {
    const auto range = range_of(m.region);
    if (!range)
      continue;
    const auto b = backend_;
    if (m.kind == residency_move_kind::to_host)
      lanes_.post(worker_lanes::for_destinations({&host, 1}),
                  logged("evict to host", [b, r = *range, host, stream] {
                    b->prefetch({&r, 1}, {&host, 1}, stream);
                  }));
    else if (m.kind == residency_move_kind::drop_copy)
      lanes_.post(worker_lanes::general, logged("drop a read-mostly copy", [b, r = *range] {
                    b->advise(r, advice::unset_read_mostly, location::host());
                  }));
    else
      lanes_.post(worker_lanes::general, logged("discard", [b, r = *range, stream] {
                    b->discard({&r, 1}, stream);
                  }));
  }
  for (const auto& m : plan.placements) {
    const auto range = range_of(m.region);
    if (!range)
      continue;
    const auto b = backend_;
    const location dev = location::device(m.device);
    if (m.kind == residency_move_kind::map_remote)
      lanes_.post(worker_lanes::general, logged("map remotely", [b, r = *range, dev] {
                    b->advise(r, advice::set_preferred_location, location::host());
                    b->advise(r, advice::set_accessed_by, dev);
                  }));
    else
      lanes_.post(
          worker_lanes::for_destinations({&dev, 1}),
          logged("place on the device",
                 [b, r = *range, dev, stream, replica = m.policy == residency_policy::read_mostly] {
                   if (replica)
                     b->advise(r, advice::set_read_mostly, dev);
                   b->prefetch({&r, 1}, {&dev, 1}, stream);
                 }));
  }
}

residency_result residency_core::will_access(const access_plan_request& r) {
  const auto regions = regions_of(r.refs, r.policy);
  auto plan = account_.will_access(regions, r.device, r.mode);
  carry_out(plan, r.stream);
  return summarize(plan);
}

std::uint64_t residency_core::done_with(std::span<const byte_ref> refs) {
  std::vector<std::uint64_t> ids;
  for (const auto& region : regions_of(refs, residency_policy::automatic))
    ids.push_back(region.id);
  account_.done_with(ids);
  return ids.size();
}

residency_result residency_core::dead(std::span<const byte_ref> refs, stream_view stream) {
  std::vector<std::uint64_t> ids;
  for (const auto& region : regions_of(refs, residency_policy::automatic))
    ids.push_back(region.id);
  auto plan = account_.dead(ids);
  carry_out(plan, stream);
  return summarize(plan);
}

std::uint64_t residency_core::budget(int device, std::uint64_t bytes) {
  if (bytes != 0)
    account_.set_budget(device, bytes);
  return account_.device(device).budget;
}

residency_report residency_core::report() const {
  residency_report out;
  for (int d = 0; d < account_.device_count(); ++d)
    out.devices.push_back(account_.device(d));
  out.totals = account_.totals();
  out.moves = counted_only_ ? "counted only: the host backend has no GPU to move data to"
                            : "made by the backend on the allocator's lanes";
  return out;
}

}  // namespace uma::detail
