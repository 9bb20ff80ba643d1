#include <uma/actors/detail/residency_core.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>

#include <uma/actors/detail/request_checks.hpp>
#include <uma/memory/advice_ops.hpp>
#include <uma/memory/detail/round_up.hpp>
#include <uma/memory/label_rows.hpp>
#include <uma/sys/detail/format.hpp>
#include <uma/sys/log.hpp>

namespace uma::detail {

residency_core::residency_core(const allocator_config& config, std::shared_ptr<backend> backend,
                               const allocation_core& core)
    : backend_(std::move(backend)),
      table_(core.table()),
      core_(core),
      emulated_(backend_->kind() == backend_kind::host),
      account_(devices_of(*backend_)) {
  for (const auto& [device, bytes] : config.residency.device_budgets)
    account_.set_budget(device, bytes);
  for (const auto& [tenant, device, bytes] : config.residency.tenant_budgets)
    account_.set_tenant_budget(tenant, device, bytes);
  account_.set_overflow(config.residency.overflow);
  account_.set_namer([this](std::uint64_t id) { return name_of(id); });
  if (!config.backend.driver_counters) {
    driver_status_ = "off (allocator_config::backend.driver_counters)";
    return;
  }
  auto source = backend_->subscribe_um_counters();
  driver_counters_ = std::move(source.subscription);
  driver_status_ = driver_counters_ ? driver_counters_->source() : "unavailable: " + source.why_not;
  if (!driver_counters_)
    log(log_level::warning, "residency: driver counters " + driver_status_);
}

void residency_core::check(const allocator_config& config, const backend& b) {
  residency_account probe(devices_of(b));
  for (const auto& [device, bytes] : config.residency.device_budgets)
    probe.set_budget(device, bytes);
  for (const auto& [tenant, device, bytes] : config.residency.tenant_budgets)
    probe.set_tenant_budget(tenant, device, bytes);
  probe.set_overflow(config.residency.overflow);
}

std::vector<std::size_t> residency_core::devices_of(const backend& b) {
  std::vector<std::size_t> out;
  for (int d = 0; d < b.device_count(); ++d)
    out.push_back(b.capabilities(d).total_memory);
  return out;
}

std::vector<residency_core::target> residency_core::targets_of(
    std::span<const byte_ref> refs, std::span<const address_range> ranges, const char* what) const {
  std::vector<target> out;
  out.reserve(refs.size() + ranges.size());
  for (const auto& ref : refs) {
    const auto* home = record_of(ref)->home;
    if (table_.find(home->id) == nullptr)
      raise(errc::invalid_argument, std::string(what) + ": region " + std::to_string(home->id) +
                                        " is not a live region here");
    const auto range = ref.range();
    out.push_back({home->id, home,
                   static_cast<std::size_t>(static_cast<const std::byte*>(range.ptr) - home->data),
                   range.bytes});
  }
  for (const auto& r : ranges) {
    std::uint64_t id = 0;
    const auto* e = r.bytes != 0 ? table_.containing(r.address, r.bytes, id) : nullptr;
    if (e == nullptr)
      raise(errc::invalid_argument,
            std::string(what) + ": bytes [" + hex(reinterpret_cast<const void*>(r.address)) +
                ", +" + std::to_string(r.bytes) + ") are not inside a live region of this " +
                "allocator" + (r.bytes == 0 ? " (a range of 0 bytes)" : ""));
    check_migrates(*e->region, what);
    out.push_back(
        {id, e->region,
         static_cast<std::size_t>(r.address - reinterpret_cast<std::uintptr_t>(e->region->data)),
         r.bytes});
  }
  return out;
}

std::vector<std::uint64_t> residency_core::extents_of(std::span<const target> targets, bool fill,
                                                      std::vector<std::uint64_t>& created,
                                                      const char* what) {
  std::vector<std::uint64_t> out;
  std::unordered_set<std::uint64_t> seen;
  std::unordered_set<std::uint64_t> fresh;  // made here: not in the account yet
  for (const auto& t : targets) {
    auto c = fill ? extents_.cover_range(t.region, t.record->bytes, t.offset, t.bytes)
                  : extents_.planned_range(t.region, t.record->bytes, t.offset, t.bytes, what);
    for (const auto& s : c.splits) {
      if (fresh.contains(s.from)) {
        fresh.insert(s.to);
        created.push_back(s.to);
      } else {
        account_.split(s.from, s.to, s.bytes);
      }
      if (seen.contains(s.from) && seen.insert(s.to).second)
        out.push_back(s.to);  // the tail of an extent named before: named with it
    }
    for (const auto id : c.created) {
      fresh.insert(id);
      created.push_back(id);
    }
    for (const auto& e : c.extents)
      if (seen.insert(e.id).second)
        out.push_back(e.id);
  }
  return out;
}

std::vector<planned_region> residency_core::planned(std::span<const std::uint64_t> ids,
                                                    const planned_region& like) const {
  std::vector<planned_region> out;
  out.reserve(ids.size());
  for (const auto id : ids) {
    const auto x = extents_.find(id);
    auto& r = out.emplace_back(like);
    r.id = id;
    r.bytes = x->bytes;
    // The account keeps a first label; a slab's extent is asked every plan, since the block
    // holding it may have been handed out again under another label (or none) since.
    if (const auto* t = table_.find(x->region))
      if (t->slab_blocks != 0 || account_.ledger(id) == nullptr)
        r.label = label_of(*t, *x);
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
  out.overflow_bytes = plan.overflow_bytes;
  return out;
}

namespace {

/// One move as its lane job sees it: the region's range, no table lookups.
struct lane_move {
  residency_move_kind kind;
  byte_range range;
  int device;
  bool replica;
  bool unmap_first;
  bool prefer_host;
};

void evict(backend& b, const lane_move& m, stream_view s) {
  const location host = location::host();
  if (m.kind == residency_move_kind::to_host) {
    b.prefetch({&m.range, 1}, {&host, 1}, s);
  } else if (m.kind == residency_move_kind::drop_copy) {
    // Unsetting read-mostly collapses the copies to the preferred location when it holds one
    // (else to any): the placement made it the host, so the host's copy stays, the device's
    // goes, nothing moves.
    if (m.prefer_host)
      b.advise(m.range, advice::set_preferred_location, host);
    b.advise(m.range, advice::unset_read_mostly, host);
  } else {
    b.discard({&m.range, 1}, s);
  }
}

void place(backend& b, const lane_move& m, stream_view s) {
  const location host = location::host();
  const location to = location::device(m.device);
  if (m.unmap_first) {
    b.advise(m.range, advice::unset_accessed_by, to);
    b.advise(m.range, advice::unset_preferred_location, host);
  }
  if (m.prefer_host)
    b.advise(m.range, advice::set_preferred_location, host);
  if (m.kind == residency_move_kind::map_remote) {
    b.advise(m.range, advice::set_accessed_by, to);
    return;
  }
  if (m.replica)
    b.advise(m.range, advice::set_read_mostly, to);
  b.prefetch({&m.range, 1}, {&to, 1}, s);
}

}  // namespace

residency_work residency_core::carry_out(const residency_plan& plan, stream_view stream) const {
  residency_work out;
  out.result = summarize(plan);
  // The host backend has no streams: its moves are recorded synchronously on the lane thread.
  out.stream = stream.handle != nullptr ? stream
               : emulated_              ? stream_view{}
                                        : stream_view::per_thread();
  const auto moves_of = [this](const std::vector<residency_move>& from) {
    std::vector<lane_move> to;
    for (const auto& m : from) {
      const auto x = extents_.find(m.region);  // the extent's bytes, exactly
      const auto* e = x ? table_.find(x->region) : nullptr;
      if (e != nullptr)
        to.push_back({m.kind,
                      {e->region->data + x->offset, x->bytes},
                      m.device,
                      m.policy == residency_policy::read_mostly,
                      m.unmap_first,
                      m.prefer_host});
    }
    return to;
  };
  const location host = location::host();
  out.evict_lane = worker_lanes::for_destinations({&host, 1});
  if (auto evictions = moves_of(plan.evictions); !evictions.empty())
    out.evict = [b = backend_, evictions = std::move(evictions), s = out.stream] {
      // A failed eviction reaches no caller (the plan's reply waits for its placements only):
      // it is logged, the account stays what it decided, and the next eviction still runs.
      for (const auto& m : evictions) {
        try {
          evict(*b, m, s);
        } catch (const std::exception& e) {
          log(log_level::warning,
              "residency: " + std::string(to_string(m.kind)) + " failed: " + e.what());
        }
      }
    };
  if (auto placements = moves_of(plan.placements); !placements.empty()) {
    const location dev = location::device(placements.front().device);
    out.place_lane = worker_lanes::for_destinations({&dev, 1});
    out.place = [b = backend_, placements = std::move(placements), s = out.stream,
                 result = out.result] {
      for (const auto& m : placements)
        place(*b, m, s);
      return result;
    };
  }
  return out;
}

residency_work residency_core::will_access(const access_plan_request& r) {
  const auto targets = targets_of(r.refs, r.ranges, "will_access");  // before anything changes
  std::vector<std::uint64_t> created;
  try {
    const auto ids = extents_of(targets, true, created, "will_access");
    const planned_region like{.policy = r.policy, .tenant = r.tenant, .cycle = r.cycle};
    return carry_out(account_.will_access(planned(ids, like), r.device, r.mode), r.stream);
  } catch (...) {
    extents_.erase(created);  // a refused plan leaves only its splits, which change no sum
    throw;
  }
}

namespace {

/// `reserve()`, with the budget's refusal said as one of `bytes` of device memory on `device`
/// (the account speaks of plans).
template <class Reserve>
auto as_device_memory(std::size_t bytes, int device, Reserve reserve) {
  try {
    return reserve();
  } catch (const error& e) {
    if (e.code() != errc::quota_exceeded)
      throw;
    raise(e.code(), "allocate: " + detail::bytes(bytes) + " of device memory on device " +
                        std::to_string(device) + " do not fit its budget (" + e.what() + ")");
  }
}

}  // namespace

void residency_core::check_reserve(int device, std::size_t bytes) const {
  as_device_memory(bytes, device, [&] {
    account_.check_reserve(device, round_up(bytes, planned_extents::page_bytes));
  });
}

residency_work residency_core::reserve(const byte_ref& ref) {
  const auto* home = record_of(ref)->home;
  const auto cover = extents_.cover_range(home->id, home->bytes, 0, home->bytes);
  std::vector<planned_region> regions;
  for (const auto& x : cover.extents)
    regions.push_back({.id = x.id, .bytes = x.bytes, .label = label_of(home->id)});
  try {
    return as_device_memory(home->bytes, home->device,
                            [&] { return carry_out(account_.reserve(regions, home->device), {}); });
  } catch (...) {
    extents_.erase(cover.created);  // a refused reservation leaves no extent behind
    throw;
  }
}

std::uint64_t residency_core::done_with(std::span<const byte_ref> refs,
                                        std::span<const address_range> ranges) {
  std::vector<std::uint64_t> created;  // stays empty: every page is planned
  const auto ids = extents_of(targets_of(refs, ranges, "done_with"), false, created, "done_with");
  account_.done_with(ids);
  return ids.size();
}

residency_work residency_core::dead(std::span<const byte_ref> refs,
                                    std::span<const address_range> ranges, stream_view stream) {
  std::vector<std::uint64_t> created;
  const auto ids = extents_of(targets_of(refs, ranges, "dead"), false, created, "dead");
  return carry_out(account_.dead(ids), stream);
}

std::uint64_t residency_core::tenant_budget(const std::string& tenant, int device,
                                            std::uint64_t bytes) {
  account_.set_tenant_budget(tenant, device, bytes);
  return account_.tenant(tenant, device).budget;
}

residency_core::budget_change residency_core::budget(int device, std::uint64_t bytes) {
  budget_change out;
  if (bytes != 0) {
    account_.set_budget(device, bytes);
    out.work = carry_out(account_.shrink_to_budget(device), {});
  }
  out.budget = account_.device(device).budget;
  return out;
}

std::string residency_core::label_of(std::uint64_t id) const {
  const auto* e = table_.find(id);
  return e != nullptr ? core_.label_of(e->region->data) : std::string{};
}

std::string residency_core::label_of(const region_table::entry& e,
                                     const planned_extents::extent& x) const {
  if (e.slab_blocks != 0)
    if (auto b = core_.blocks()->labelled_holding(e.region->data + x.offset, x.bytes))
      return std::move(b->label);
  return core_.label_of(e.region->data);
}

std::string residency_core::name_of(std::uint64_t id) const {
  const auto x = extents_.find(id);
  if (!x)
    return "extent " + std::to_string(id);
  std::string out = "bytes [" + std::to_string(x->offset) + ", +" + std::to_string(x->bytes) +
                    ") of region " + std::to_string(x->region);
  const auto* e = table_.find(x->region);
  if (e != nullptr && e->slab_blocks != 0)
    if (const auto b = core_.blocks()->labelled_holding(e->region->data + x->offset, x->bytes))
      out += ", of block " + std::to_string(b->id) + " ('" + b->label + "', " +
             std::to_string(b->bytes) + " bytes)";
  return out;
}

std::shared_ptr<residency_core::driver_take_in> residency_core::driver_take_in_job() const {
  if (!driver_counters_)
    return nullptr;
  auto out = std::make_shared<driver_take_in>();
  out->from = driver_counters_.get();
  return out;
}

void residency_core::take_in(const driver_take_in& in) {
  const auto& records = in.records;
  if (records.empty())
    return;
  std::vector<ledger_range> ranges;
  ranges.reserve(table_.size());
  table_.for_each([&](std::uint64_t id, const region_table::entry& e) {
    const auto begin = reinterpret_cast<std::uintptr_t>(e.region->data);
    ranges.push_back({begin, begin + e.region->bytes, id});
  });
  std::sort(ranges.begin(), ranges.end(),
            [](const ledger_range& a, const ledger_range& b) { return a.begin < b.begin; });
  driver_.add(records, ranges);
}

residency_report residency_core::report() const {
  residency_report out;
  for (int d = 0; d < account_.device_count(); ++d)
    out.devices.push_back(account_.device(d));
  out.totals = account_.totals();
  out.moves = emulated_ ? "recorded by the host backend on its emulated devices (counted, no data "
                          "copied)"
                        : "made by the backend on the allocator's lanes";
  out.driver_counters_on = driver_counters_ != nullptr;
  out.driver_counters = driver_status_;
  out.driver_totals = driver_.totals();
  out.driver_unattributed = driver_.unattributed();
  out.driver_records_dropped = driver_counters_ ? driver_counters_->dropped() : 0;
  std::map<std::string, label_residency> labels;
  for (auto& [label, moves] : account_.by_label())
    labels[label].moves = moves;
  for (const auto& [label, counted] : driver_.by_label())
    labels[label].driver = counted;
  out.labels = fold_labels(labels, max_metric_labels,
                           [](label_residency& other, const label_residency& row) {
                             other.moves += row.moves;
                             other.driver += row.driver;
                           });
  table_.for_each([&](std::uint64_t id, const region_table::entry& e) {
    if (e.region->kind == memory_kind::cuda_managed)  // the host tier is not device-side
      out.unplanned_bytes += e.region->bytes - extents_.covered(id);
  });
  out.copies = core_.copies();
  for (auto& name : account_.tenants()) {
    tenant_residency t{std::move(name), {}};
    for (int d = 0; d < account_.device_count(); ++d)
      t.devices.push_back(account_.tenant(t.tenant, d));
    out.tenants.push_back(std::move(t));
  }
  return out;
}

allocator_stats residency_core::with_totals(allocator_stats s) const noexcept {
  s.resident_bytes = account_.resident();
  s.residency_to_device_bytes = account_.totals().to_device_bytes;
  s.residency_to_host_bytes = account_.totals().to_host_bytes;
  const auto& driver = driver_.totals();
  s.driver_to_device_bytes = driver.to_device_bytes;
  s.driver_to_host_bytes = driver.to_host_bytes;
  s.driver_page_faults = driver.cpu_page_faults + driver.gpu_page_faults;
  return s;
}

allocator_snapshot residency_core::annotated(allocator_snapshot s) const {
  for (auto& r : s.regions) {
    // The region's extents summed: one is resident (the first found), one placed says the policy.
    std::optional<region_residency> out;
    for (const auto& x : extents_.of(r.info.id)) {
      const auto* moves = account_.ledger(x.id);
      if (moves == nullptr)
        continue;
      if (!out)
        out.emplace();
      out->moves += *moves;
      if (const auto on = account_.resident_on(x.id); on && out->device < 0)
        out->device = *on;
      if (const auto p = account_.effective_policy(x.id); p && moves->placements > 0)
        out->policy = std::string(to_string(*p));
    }
    const auto* counted = driver_.region(r.info.id);
    if (!out && counted == nullptr)
      continue;
    if (!out)
      out.emplace();
    out->driver = counted != nullptr ? *counted : driver_ledger{};
    r.residency = std::move(*out);
  }
  return s;
}

}  // namespace uma::detail
