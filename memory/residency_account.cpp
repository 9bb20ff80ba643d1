#include <uma/memory/residency_account.hpp>

#include <algorithm>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include <uma/memory/detail/residency_room.hpp>
#include <uma/sys/error.hpp>

namespace uma {

namespace {

bool places_on_device(residency_policy p) noexcept {
  return p == residency_policy::migrate || p == residency_policy::read_mostly ||
         p == residency_policy::discard;
}

}  // namespace

std::string residency_account::name_of(std::uint64_t id) const {
  return namer_ ? namer_(id) : "region " + std::to_string(id);
}

residency_account::residency_account(std::vector<std::size_t> device_memory)
    : tenants_(device_memory) {
  devices_.reserve(device_memory.size());
  for (const auto bytes : device_memory)
    devices_.push_back(device_residency{bytes, 0, 0, 0, 0});
}

void residency_account::check_device(int device, const char* what) const {
  if (device < 0 || device >= device_count())
    raise(errc::invalid_argument,
          std::string(what) + ": device " + std::to_string(device) +
              " does not exist (devices: " + std::to_string(device_count()) + ")");
}

void residency_account::set_budget(int device, std::size_t bytes) {
  check_device(device, "set_budget");
  auto& d = devices_[static_cast<std::size_t>(device)];
  if (bytes == 0 || bytes > d.memory)
    raise(errc::invalid_argument, "set_budget: a budget of " + std::to_string(bytes) +
                                      " bytes on device " + std::to_string(device) +
                                      "; it must be 1 byte to the device's " +
                                      std::to_string(d.memory) + " bytes");
  d.budget = bytes;
}

void residency_account::set_overflow(budget_overflow mode) {
  if (mode != budget_overflow::refuse && mode != budget_overflow::map)
    raise(errc::invalid_argument, "overflow: budget_overflow " +
                                      std::to_string(static_cast<int>(mode)) +
                                      " does not exist (refuse or map)");
  overflow_ = mode;
}

void residency_account::set_tenant_budget(std::string_view tenant, int device, std::size_t bytes) {
  check_device(device, "tenant_budget");
  tenants_.set(tenant, device, bytes);
}

device_residency residency_account::tenant(std::string_view tenant, int device) const {
  check_device(device, "tenant");
  auto d = tenants_.get(tenant, device);
  for (const auto& [id, e] : entries_)
    if (e.device == device && e.holds > 0 && e.tenant == tenant)
      d.held += e.bytes;
  return d;
}

void residency_account::arrive(const entry& e, int device) noexcept {
  auto& d = devices_[static_cast<std::size_t>(device)];
  d.resident += e.bytes;
  d.peak = std::max(d.peak, d.resident);
  tenants_.placed(e.tenant, device, e.bytes);
}

void residency_account::leave(const entry& e) noexcept {
  if (e.device < 0)
    return;
  devices_[static_cast<std::size_t>(e.device)].resident -= e.bytes;
  tenants_.left(e.tenant, e.device, e.bytes);
}

device_residency residency_account::device(int device) const {
  check_device(device, "device");
  auto d = devices_[static_cast<std::size_t>(device)];
  d.held = 0;
  for (const auto& [id, e] : entries_)
    if (e.device == device && e.holds > 0)
      d.held += e.bytes;
  return d;
}

std::size_t residency_account::cycle_resident(int device, cycle_hint cycle) const noexcept {
  std::size_t out = 0;
  for (const auto& [id, e] : entries_)
    if (e.device == device && (e.holds > 0 || e.last_use + cycle.plans > clock_))
      out += e.bytes;
  return out;
}

residency_policy residency_account::choose(const entry& e, access_mode mode,
                                           bool cycle_overflows) const noexcept {
  if (e.requested != residency_policy::automatic)
    return e.requested;
  if (e.streamed || e.evicted_unused)
    return residency_policy::remote_map;  // streamed through the budget: map, do not move
  if (mode == access_mode::write || e.written)
    return residency_policy::migrate;
  if (cycle_overflows)
    return residency_policy::remote_map;  // the resident part of the cycle stays; this streams
  return residency_policy::read_mostly;   // eviction is free while it is only read
}

residency_move residency_account::evict(std::uint64_t id, entry& e) {
  residency_move m{residency_move_kind::to_host, id, e.device, e.bytes, e.effective};
  if (e.effective == residency_policy::discard)
    m.kind = residency_move_kind::discard;
  else if (e.replica && !e.dirty)  // placed as a copy (whatever the policy is now), not written
    m.kind = residency_move_kind::drop_copy;
  residency_ledger moved{.evictions = 1};
  switch (m.kind) {
    case residency_move_kind::to_host:
      moved.to_host_bytes = e.bytes;
      break;
    case residency_move_kind::drop_copy:
      moved.dropped_bytes = e.bytes;
      break;
    default:
      moved.discarded_bytes = e.bytes;
  }
  charge(e, moved);
  leave(e);
  e.device = -1;
  e.dirty = false;
  e.replica = false;
  e.evicted_unused = true;
  return m;
}

void residency_account::place(std::uint64_t id, entry& e, int device, residency_plan& plan) {
  leave(e);  // moves between devices
  arrive(e, device);
  e.device = device;
  charge(e, {.to_device_bytes = e.bytes, .placements = 1, .refetches = e.evicted_unused ? 1u : 0u});
  residency_move m{residency_move_kind::to_device, id, device, e.bytes, e.effective};
  if (e.mapped >= 0) {  // the mapping's advice goes, the preferred location with it
    m.unmap_first = true;
    e.mapped = -1;
    e.host_preferred = false;
  }
  e.replica = e.effective == residency_policy::read_mostly;
  if (e.replica && !e.host_preferred)
    m.prefer_host = e.host_preferred = true;
  plan.placements.push_back(m);
}

residency_account::decision residency_account::decide(std::span<const planned_region> regions,
                                                      int device, access_mode mode) const {
  decision out;
  out.next.reserve(regions.size());
  const auto budget = devices_[static_cast<std::size_t>(device)].budget;
  // What a cycle keeps on the device: counted once per plan (all its regions share the cycle).
  std::optional<std::pair<std::uint32_t, std::size_t>> kept;
  const auto cycle_kept = [&](cycle_hint c) {
    if (!kept || kept->first != c.plans)
      kept.emplace(c.plans, cycle_resident(device, c));
    return kept->second;
  };
  for (const auto& r : regions) {
    if (r.bytes == 0)
      raise(errc::invalid_argument, "will_access: " + name_of(r.id) + " has 0 bytes");
    if (static_cast<std::uint8_t>(r.policy) >
        static_cast<std::uint8_t>(residency_policy::automatic))
      raise(errc::invalid_argument, "will_access: " + name_of(r.id) + " names policy " +
                                        std::to_string(static_cast<int>(r.policy)) +
                                        ", which does not exist");
    const auto found = entries_.find(r.id);
    entry e = found != entries_.end() ? found->second : entry{};
    if (found == entries_.end()) {
      if (!r.tenant.empty())  // later plans must name the same tenant: checked once, here
        tenant_budgets::check_name(r.tenant, "will_access");
      e.bytes = r.bytes;
      e.label = r.label;
      e.tenant = r.tenant;
    } else if (e.tenant != r.tenant) {
      raise(errc::invalid_argument, "will_access: " + name_of(r.id) + " counts for tenant '" +
                                        e.tenant + "'; the plan names tenant '" + r.tenant + "'");
    } else if (e.bytes != r.bytes) {
      raise(errc::invalid_argument, "will_access: " + name_of(r.id) + " has " +
                                        std::to_string(e.bytes) + " bytes; the plan says " +
                                        std::to_string(r.bytes));
    } else if (!r.label.empty()) {
      e.label = r.label;  // relabelled, if it differs: the old label keeps its share (below)
    }
    if (e.holds > 0 && e.device >= 0 && e.device != device)
      raise(errc::invalid_argument, "will_access: " + name_of(r.id) +
                                        " is held by a plan on device " + std::to_string(e.device) +
                                        " (done_with it first)");
    e.requested = r.policy;
    e.overflowed = false;  // victims decides it again, for this plan
    // A cycle larger than the budget (the caller's sequence says so): what is not resident and
    // does not fit without evicting part of the cycle is read across the link instead.
    const bool overflows = budget != 0 && r.cycle.bytes > budget && e.device != device &&
                           cycle_kept(r.cycle) + out.needed + e.bytes > budget;
    e.effective = choose(e, mode, overflows);
    if (places_on_device(e.effective) && e.device != device) {
      if (e.bytes > SIZE_MAX - out.needed)
        raise(errc::invalid_argument, "will_access: the plan's bytes overflow");
      out.needed += e.bytes;
    }
    if (!out.next.emplace(r.id, std::move(e)).second)
      raise(errc::invalid_argument, "will_access: " + name_of(r.id) + " is named twice");
    out.order.push_back(r.id);
  }
  return out;
}

detail::residency_room residency_account::room_on(int device, const decision* plan) const {
  std::vector<detail::resident_region> on;
  for (const auto& [id, e] : entries_)
    if (e.device == device)
      on.push_back({id, e.bytes, e.last_use, e.holds > 0,
                    plan != nullptr && plan->next.contains(id), e.tenant});
  return detail::residency_room(std::move(on));
}

std::vector<std::uint64_t> residency_account::victims(decision& plan, int device,
                                                      bool may_map) const {
  std::vector<detail::plan_part> parts;
  parts.reserve(plan.order.size());
  for (const auto id : plan.order) {
    const auto& e = plan.next.at(id);
    parts.push_back({id, e.bytes, e.tenant, places_on_device(e.effective), e.device == device});
  }
  auto budgets =
      detail::plan_budgets(parts, tenants_, devices_[static_cast<std::size_t>(device)], device);
  if (budgets.empty())
    return {};  // nothing to fit: no region is looked at
  auto fit = room_on(device, &plan)
                 .fit(parts, std::move(budgets), may_map ? overflow_ : budget_overflow::refuse);
  for (const auto id : fit.mapped) {
    auto& e = plan.next.at(id);
    e.effective = residency_policy::remote_map;  // apply maps it as that policy would
    e.overflowed = true;
  }
  return std::move(fit.victims);
}

residency_plan residency_account::shrink_to_budget(int device) {
  check_device(device, "shrink_to_budget");
  const auto& d = devices_[static_cast<std::size_t>(device)];
  residency_plan plan;
  if (d.budget == 0 || d.resident <= d.budget)
    return plan;  // a budget raised, set again or never passed: nothing moves
  std::vector<std::uint64_t> out;
  const detail::budget_scope lowered{d.budget, d.resident, 0, 0, {}, std::nullopt};  // no plan
  room_on(device, nullptr).evict_down(lowered, out);
  plan.evictions.reserve(out.size());  // from here on nothing throws
  for (const auto id : out)
    plan.evictions.push_back(evict(id, entries_.at(id)));
  return plan;
}

void residency_account::apply(std::uint64_t id, entry& e, int device, access_mode mode,
                              residency_plan& plan) {
  if (places_on_device(e.effective)) {
    if (e.device != device)
      place(id, e, device, plan);
  } else {
    if (e.device >= 0)  // now remote_map: out of the device first, then mapped
      plan.evictions.push_back(evict(id, e));
    if (e.mapped != device) {  // mapped once: advice costs milliseconds even when it changes
      residency_move m{residency_move_kind::map_remote, id, device, e.bytes, e.effective};
      m.prefer_host = !e.host_preferred;
      plan.placements.push_back(m);
    }
    e.mapped = device;
    e.host_preferred = true;
  }
  // Mapped for want of room is not streamed: a later plan with room places it.
  e.streamed = e.requested == residency_policy::automatic &&
               e.effective == residency_policy::remote_map && !e.overflowed;
  if (e.overflowed)
    plan.overflow_bytes += e.bytes;
  ++e.holds;
  e.last_use = clock_;
  e.evicted_unused = false;
  e.written = e.written || mode == access_mode::write;
  e.dirty = e.device == device && (e.dirty || mode == access_mode::write);
}

template <class Enter>
residency_plan residency_account::admit(std::span<const planned_region> regions, int device,
                                        access_mode mode, bool may_map, Enter enter) {
  // Validation, decisions and victims on copies: nothing changes before the plan is known to fit.
  auto decided = decide(regions, device, mode);
  const auto evicted = victims(decided, device, may_map);
  residency_plan plan;
  plan.evictions.reserve(evicted.size() + regions.size());
  plan.placements.reserve(regions.size());
  for (const auto& r : regions)
    tenants_.track(r.tenant);
  entries_.reserve(entries_.size() + regions.size());  // from here on nothing throws
  for (const auto id : evicted)
    plan.evictions.push_back(evict(id, entries_.at(id)));
  ++clock_;
  for (const auto& r : regions) {
    auto& next = decided.next.at(r.id);
    if (const auto was = entries_.find(r.id);
        was != entries_.end() && was->second.label != next.label) {
      keep(was->second);  // the moves so far stay with the old label; the new one's start here
      next.labelled = {};
    }
    auto& e = entries_[r.id] = std::move(next);
    enter(r.id, e, plan);
  }
  return plan;
}

residency_plan residency_account::will_access(std::span<const planned_region> regions, int device,
                                              access_mode mode) {
  check_device(device, "will_access");
  if (mode != access_mode::read && mode != access_mode::write)
    raise(errc::invalid_argument, "will_access: an access mode that is neither read nor write");
  if (regions.empty())
    raise(errc::invalid_argument, "will_access: a plan names no region");
  return admit(regions, device, mode, true, [&](std::uint64_t id, entry& e, residency_plan& plan) {
    apply(id, e, device, mode, plan);
  });
}

void residency_account::check_reserve(int device, std::size_t bytes) const {
  check_device(device, "reserve");
  const planned_region fresh{.id = 0, .bytes = bytes, .policy = residency_policy::migrate};
  auto plan = decide({&fresh, 1}, device, access_mode::write);
  static_cast<void>(victims(plan, device, false));  // device memory is never mapped instead
}

residency_plan residency_account::reserve(std::span<const planned_region> regions, int device) {
  check_device(device, "reserve");
  if (regions.empty())
    raise(errc::invalid_argument, "reserve: no region named");
  std::vector<planned_region> placed(regions.begin(), regions.end());
  for (auto& r : placed) {
    if (entries_.contains(r.id))
      raise(errc::invalid_argument, "reserve: " + name_of(r.id) + " is in the account already");
    r.policy = residency_policy::migrate;
  }
  return admit(placed, device, access_mode::write, false,
               [&](std::uint64_t, entry& e, residency_plan&) {
                 arrive(e, device);  // not place(): nothing moves, and the ledger counts no move
                 e.device = device;
                 e.holds = 1;  // held for its whole life, never evicted: forget() ends it
                 e.last_use = clock_;
               });
}

void residency_account::done_with(std::span<const std::uint64_t> ids) {
  std::unordered_map<std::uint64_t, std::uint32_t> count;
  for (const auto id : ids)
    ++count[id];
  for (const auto& [id, n] : count) {
    const auto it = entries_.find(id);
    if (it == entries_.end())
      raise(errc::invalid_argument, "done_with: " + name_of(id) + " is in no plan");
    if (it->second.holds < n)
      raise(errc::invalid_argument, "done_with: " + name_of(id) + " is held by " +
                                        std::to_string(it->second.holds) + " plan(s), not " +
                                        std::to_string(n));
  }
  for (const auto& [id, n] : count)
    entries_.at(id).holds -= n;
}

residency_plan residency_account::dead(std::span<const std::uint64_t> ids) {
  std::unordered_map<std::uint64_t, bool> seen;
  for (const auto id : ids) {
    const auto it = entries_.find(id);
    if (it == entries_.end())
      raise(errc::invalid_argument, "dead: " + name_of(id) + " is in no plan");
    if (it->second.holds > 0)
      raise(errc::invalid_argument, "dead: " + name_of(id) + " is held by " +
                                        std::to_string(it->second.holds) +
                                        " plan(s) (done_with it first)");
    if (!seen.emplace(id, true).second)
      raise(errc::invalid_argument, "dead: " + name_of(id) + " is named twice");
  }
  residency_plan plan;
  plan.evictions.reserve(ids.size());
  for (const auto id : ids) {
    auto& e = entries_.at(id);
    plan.evictions.push_back({residency_move_kind::discard, id, e.device, e.bytes, e.effective});
    charge(e, {.discarded_bytes = e.bytes});
    leave(e);
    e.device = -1;
    e.dirty = false;
    e.replica = false;
    e.evicted_unused = false;  // nothing was lost: the contents were not wanted
  }
  return plan;
}

void residency_account::split(std::uint64_t id, std::uint64_t to, std::size_t bytes) {
  const auto it = entries_.find(id);
  if (it == entries_.end())
    raise(errc::invalid_argument, "split: " + name_of(id) + " is in no plan");
  if (entries_.contains(to))
    raise(errc::invalid_argument, "split: " + name_of(to) + " is in the account already");
  if (bytes == 0 || bytes >= it->second.bytes)
    raise(errc::invalid_argument, "split: " + name_of(id) + " has " +
                                      std::to_string(it->second.bytes) + " bytes; cannot give " +
                                      std::to_string(bytes) + " of them away");
  entry part = it->second;
  part.bytes = bytes;
  part.ledger = {};
  part.labelled = {};
  entries_.emplace(to, std::move(part));  // may rehash: `it` is not used after it
  entries_.at(id).bytes -= bytes;         // the device's and tenants' sums do not change
}

void residency_account::forget(std::uint64_t id) noexcept {
  const auto it = entries_.find(id);
  if (it == entries_.end())
    return;
  leave(it->second);
  keep(it->second);
  entries_.erase(it);
}

void residency_account::charge(entry& e, const residency_ledger& moved) noexcept {
  e.ledger += moved;
  e.labelled += moved;
  totals_ += moved;
}

void residency_account::keep(const entry& e) noexcept {
  try {
    forgotten_by_label_[e.label] += e.labelled;
  } catch (const std::bad_alloc&) {
    // The label's share is lost (no memory for a new label); the totals keep it.
  }
}

void residency_account::clear() noexcept {
  for (const auto& [id, e] : entries_)
    keep(e);
  entries_.clear();
  for (auto& d : devices_)
    d.resident = 0;
  tenants_.clear();
}

const residency_ledger* residency_account::ledger(std::uint64_t id) const noexcept {
  const auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second.ledger;
}

std::map<std::string, residency_ledger> residency_account::by_label() const {
  auto out = forgotten_by_label_;
  for (const auto& [id, e] : entries_)
    out[e.label] += e.labelled;
  return out;
}

std::optional<residency_policy> residency_account::effective_policy(
    std::uint64_t id) const noexcept {
  const auto it = entries_.find(id);
  if (it == entries_.end())
    return std::nullopt;
  return it->second.effective;
}

std::optional<int> residency_account::resident_on(std::uint64_t id) const noexcept {
  const auto it = entries_.find(id);
  if (it == entries_.end() || it->second.device < 0)
    return std::nullopt;
  return it->second.device;
}

}  // namespace uma
