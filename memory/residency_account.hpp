#pragma once

// The residency account (issue 15, docs/residency.md): what uma placed on which device, kept at
// or under a per-device budget by evicting before it places. CAF-free and backend-free: it
// decides the moves (prefetch to a device, prefetch back, drop a read-mostly copy, discard,
// map remotely) and counts them in a per-region ledger; whoever owns it carries them out.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <uma/memory/device_residency.hpp>
#include <uma/memory/residency_types.hpp>
#include <uma/memory/tenant_budgets.hpp>

namespace uma {

namespace detail {
class residency_room;  // memory/detail/residency_room.hpp: the choice of victims
}  // namespace detail

/// Not thread-safe: one owner (the residency actor) calls it. Every call validates all of its
/// input before it changes anything; a refusal throws uma::error (invalid_argument, or
/// quota_exceeded for a plan the budget cannot hold, unless overflow is budget_overflow::map)
/// naming what was wrong.
class residency_account {
 public:
  /// `device_memory[d]`: the bytes of device d.
  explicit residency_account(std::vector<std::size_t> device_memory);

  /// How refusals name an id (default: "region N"); the allocator names its extents by their
  /// region and bytes.
  void set_namer(std::function<std::string(std::uint64_t)> namer) { namer_ = std::move(namer); }

  [[nodiscard]] int device_count() const noexcept { return static_cast<int>(devices_.size()); }
  /// Sets device `device`'s budget: 1 byte up to its memory. It moves nothing: shrink_to_budget
  /// evicts down to a budget lowered below what is resident (as the next plan would).
  void set_budget(int device, std::size_t bytes);
  /// The evictions that bring device `device`'s resident bytes within its budget, made now in
  /// the account: the least recently used regions no plan holds first, each moved as a plan's
  /// eviction would move it (its contents kept) and counted in its ledger. Held regions stay: if
  /// they alone pass the budget, `resident` stays above it until they are done with and the next
  /// plan evicts down to it. An empty plan when the device has no budget or is within it.
  [[nodiscard]] residency_plan shrink_to_budget(int device);
  [[nodiscard]] device_residency device(int device) const;
  /// What a plan the budgets cannot hold gets (budget_overflow::refuse until set): see
  /// will_access. invalid_argument naming the value when it does not exist (nothing changes).
  void set_overflow(budget_overflow mode);
  [[nodiscard]] budget_overflow overflow() const noexcept { return overflow_; }
  /// Sets `tenant`'s budget on `device`: 0 removes it, else at most the device's memory. Unlike
  /// the device's, a lowered budget has no shrink: it evicts nothing at once, the tenant's next
  /// plan on the device evicts down to it (its own least recently used regions first).
  void set_tenant_budget(std::string_view tenant, int device, std::size_t bytes);
  /// `tenant`'s account on `device` (all 0 for a tenant never seen).
  [[nodiscard]] device_residency tenant(std::string_view tenant, int device) const;
  /// Tenants with a budget or bytes placed so far, sorted.
  [[nodiscard]] std::vector<std::string> tenants() const { return tenants_.names(); }
  /// Bytes resident on every device together.
  [[nodiscard]] std::size_t resident() const noexcept {
    std::size_t out = 0;
    for (const auto& d : devices_)
      out += d.resident;
    return out;
  }

  /// Regions about to be used on `device`: places what is not resident there, evicting the
  /// least recently used regions no plan holds until the budget fits, and holds every region
  /// until done_with. An `automatic` region is mapped remotely (remote_map, for good) once it
  /// is asked for again after an eviction with no use in between (it streams through the
  /// budget: moving it would cost both ways every pass); before that it is read_mostly while
  /// only read (eviction then moves nothing) and migrate once written.
  /// A region's bytes and requested policy are taken from its first plan; later plans must
  /// name the same bytes (the policy may change: it applies from that plan on). Its label too,
  /// unless a later plan names another (not empty): the moves counted so far stay with the old
  /// label, the next ones count for the new (an extent of a slab whose slot was handed out
  /// again under another label; docs/residency.md "Labels").
  /// A plan its budgets (the device's, its tenants') cannot hold even after those evictions is
  /// refused with quota_exceeded under budget_overflow::refuse. Under budget_overflow::map it is
  /// not: its regions are placed in its order while they fit (a region that does not fit is
  /// skipped, a later smaller one may still fit), the others are mapped remotely for `device`
  /// as remote_map maps them (never resident, charged nothing) and counted in the plan's
  /// `overflow_bytes`; a later plan with room places them (undoing the mapping first). What is
  /// resident on `device` already stays, even when held regions pass the budget.
  [[nodiscard]] residency_plan will_access(std::span<const planned_region> regions, int device,
                                           access_mode mode);
  /// Regions of device memory (a tier: docs/design.md "Tiers") that are resident on `device`
  /// for their whole life: charged to its budget (and its peak) as held, with no move and no
  /// ledger entry (nothing moved), until forget. The least recently used regions no plan holds
  /// are evicted to make room, as for a plan; quota_exceeded when the budget cannot hold them,
  /// invalid_argument for a region already in the account or of 0 bytes (nothing changes).
  [[nodiscard]] residency_plan reserve(std::span<const planned_region> regions, int device);
  /// Whether `bytes` more could be reserved on `device` now (evicting what a plan may): throws
  /// what reserve would, changing nothing (a fresh region of id 0, which no extent has).
  void check_reserve(int device, std::size_t bytes) const;
  /// The plans on `ids` are over: their regions may be evicted again (one hold each).
  void done_with(std::span<const std::uint64_t> ids);
  /// The contents of `ids` are no longer needed: device copies are discarded, nothing moves
  /// back. Refused for a region a plan still holds.
  [[nodiscard]] residency_plan dead(std::span<const std::uint64_t> ids);
  /// The allocator freed region `id`: it leaves the account (its ledger goes to the totals).
  void forget(std::uint64_t id) noexcept;
  /// Region `id` (an extent of pages, docs/residency.md "Ranges") gives its last `bytes` to a
  /// new region `to`, which copies its state: the device it is resident on, its holds, dirty and
  /// written flags, requested and effective policy, mapping, tenant, label and last use. The
  /// ledger stays with `id` (`to` starts with none: the moves were made before it existed), so
  /// every sum (resident, held, tenants', totals, labels') stays what it was. invalid_argument
  /// (nothing changes) for an unknown `id`, a `to` in the account, or `bytes` not in
  /// [1, bytes of `id`).
  void split(std::uint64_t id, std::uint64_t to, std::size_t bytes);
  /// The allocator stopped: every region leaves, holds included; the totals stay.
  void clear() noexcept;

  [[nodiscard]] const residency_ledger* ledger(std::uint64_t id) const noexcept;
  /// Every region's ledger summed, the forgotten ones' included.
  [[nodiscard]] const residency_ledger& totals() const noexcept { return totals_; }
  /// The same per label (the label of each region's first plan), sorted by label.
  [[nodiscard]] std::map<std::string, residency_ledger> by_label() const;
  /// The policy region `id` was last placed with (never automatic), if it is known.
  [[nodiscard]] std::optional<residency_policy> effective_policy(std::uint64_t id) const noexcept;
  /// The device region `id` is resident on, if any.
  [[nodiscard]] std::optional<int> resident_on(std::uint64_t id) const noexcept;
  [[nodiscard]] std::size_t regions() const noexcept { return entries_.size(); }

 private:
  struct entry {
    std::size_t bytes = 0;
    residency_policy requested = residency_policy::automatic;
    residency_policy effective = residency_policy::migrate;
    int device = -1;       // resident on (-1: none)
    bool dirty = false;    // written on the device since placed
    bool written = false;  // ever written by a plan
    bool evicted_unused = false;
    bool streamed = false;        // automatic chose remote_map: it stays mapped
    bool overflowed = false;      // mapped by this plan for want of room (budget_overflow::map)
    int mapped = -1;              // remotely mapped for this device (-1: not mapped)
    bool replica = false;         // resident as a read-mostly copy (its eviction drops it)
    bool host_preferred = false;  // its preferred location is the host (advised by a move)
    std::uint32_t holds = 0;
    std::uint64_t last_use = 0;
    residency_ledger ledger;
    residency_ledger labelled;  // the part of `ledger` counted under `label` (by_label's)
    std::string label;
    std::string tenant;
  };

  /// A plan's regions as they would be after it (and in its order), and the bytes it adds to
  /// the device.
  struct decision {
    std::unordered_map<std::uint64_t, entry> next;
    std::vector<std::uint64_t> order;
    std::size_t needed = 0;
  };

  void check_device(int device, const char* what) const;
  /// What will_access and reserve share: decides `regions` on `device` (validating them), finds
  /// the victims (or refuses; with `may_map` under budget_overflow::map, maps what does not fit
  /// instead), evicts them, then enters each region and calls `enter(id, entry, plan)` for it.
  /// Nothing changes before the plan is known to fit.
  template <class Enter>
  [[nodiscard]] residency_plan admit(std::span<const planned_region> regions, int device,
                                     access_mode mode, bool may_map, Enter enter);
  [[nodiscard]] std::string name_of(std::uint64_t id) const;
  [[nodiscard]] decision decide(std::span<const planned_region> regions, int device,
                                access_mode mode) const;
  /// The regions to evict, least recently used first, for `plan` to fit its budgets (the
  /// device's, its tenants': detail::residency_room::fit); quota_exceeded when it cannot,
  /// unless `may_map` and overflow is budget_overflow::map: then the regions that do not fit
  /// are marked in `plan` to be mapped instead (`overflowed`) and nothing is refused.
  [[nodiscard]] std::vector<std::uint64_t> victims(decision& plan, int device, bool may_map) const;
  /// The regions resident on `device`, least recently used first; those `plan` names (if any)
  /// stay.
  [[nodiscard]] detail::residency_room room_on(int device, const decision* plan) const;
  /// A region's bytes arrive on / leave `device` (the device's and its tenant's resident bytes).
  void arrive(const entry& e, int device) noexcept;
  void leave(const entry& e) noexcept;
  void apply(std::uint64_t id, entry& e, int device, access_mode mode, residency_plan& plan);
  [[nodiscard]] residency_policy choose(const entry& e, access_mode mode,
                                        bool cycle_overflows) const noexcept;
  /// Bytes on `device` that a plan holds or that were used within the last `cycle.plans` plans.
  [[nodiscard]] std::size_t cycle_resident(int device, cycle_hint cycle) const noexcept;
  [[nodiscard]] residency_move evict(std::uint64_t id, entry& e);
  /// Counts `moved` in `e`'s ledger and in the totals.
  void charge(entry& e, const residency_ledger& moved) noexcept;
  /// A leaving (or relabelled) region's share stays in its label's.
  void keep(const entry& e) noexcept;
  void place(std::uint64_t id, entry& e, int device, residency_plan& plan);

  std::vector<device_residency> devices_;
  tenant_budgets tenants_;
  std::unordered_map<std::uint64_t, entry> entries_;
  residency_ledger totals_;
  std::map<std::string, residency_ledger> forgotten_by_label_;
  std::uint64_t clock_ = 0;
  budget_overflow overflow_ = budget_overflow::refuse;
  std::function<std::string(std::uint64_t)> namer_;
};

}  // namespace uma
