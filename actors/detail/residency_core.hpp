#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/detail/allocation_core.hpp>
#include <uma/memory/allocator_snapshot.hpp>
#include <uma/memory/detail/region_table.hpp>
#include <uma/memory/migration_ledger.hpp>
#include <uma/memory/planned_extents.hpp>
#include <uma/memory/residency_account.hpp>
#include <uma/messages/requests.hpp>
#include <uma/sys/worker_lanes.hpp>

namespace uma::detail {

/// A plan's moves as two lane jobs for the allocator to queue: the evictions on the host lane
/// while the placements run on the device's lane, so that both directions of the link are busy
/// at once. An empty job: nothing of that kind (the host backend only counts its moves).
struct residency_work {
  residency_result result;
  std::function<void()> evict;  ///< device -> host prefetches, dropped copies, discards (logged)
  /// Host -> device prefetches and remote mappings (throws); returns `result`, the reply.
  std::function<residency_result()> place;
  std::size_t evict_lane = worker_lanes::general;
  std::size_t place_lane = worker_lanes::general;
  /// The moves' stream: the plan's, or each lane thread's own when the plan names none.
  stream_view stream{};
};

/// The allocator's residency (docs/residency.md): its account of what is placed on which device
/// under which budget, and the moves that keep it so, queued on the allocator's lanes (device
/// -> host prefetches on the host lane while host -> device prefetches run on the device's
/// lane). Plans act on extents of pages (memory/planned_extents.hpp): a ref plans its own bytes
/// (a direct region whole, a block of the block allocator its pages), a range by address the
/// pages it covers in the live region holding it (found through the region table).
/// On the host backend the devices are its emulated ones and the moves are recorded by it
/// (counted, no data copied). Part of the incarnation's state (actors/detail/incarnation.hpp),
/// reachable only through its guard; not thread-safe on its own.
/// Throws uma::error (nothing changed).
class residency_core {
 public:
  /// `core`: the allocator's regions (its table), their labels, and its block allocator, whose
  /// labelled blocks name the extents of a slab they hold (docs/residency.md "The ledger"). It
  /// outlives the residency core.
  residency_core(const allocator_config& config, std::shared_ptr<backend> backend,
                 const allocation_core& core);

  /// Throws what the constructor would for `config`'s budgets (invalid_argument naming the
  /// device and the bytes, or the overflow mode that does not exist).
  static void check(const allocator_config& config, const backend& b);

  [[nodiscard]] residency_work will_access(const access_plan_request& r);
  /// Device memory (a tier) just adopted as `ref`'s region: charged whole to its device's
  /// budget for its life (residency_account::reserve); the work evicts what made room.
  /// quota_exceeded naming the bytes and the device when the budget cannot hold it.
  [[nodiscard]] residency_work reserve(const byte_ref& ref);
  /// Throws what reserve would for `bytes` of device memory on `device`, changing nothing.
  void check_reserve(int device, std::size_t bytes) const;
  /// Releases one hold on each extent the refs and ranges cover; returns the extents released.
  [[nodiscard]] std::uint64_t done_with(std::span<const byte_ref> refs,
                                        std::span<const address_range> ranges);
  [[nodiscard]] residency_work dead(std::span<const byte_ref> refs,
                                    std::span<const address_range> ranges, stream_view stream);
  /// A budget set: the one in force, and the evictions down to it.
  struct budget_change {
    std::uint64_t budget = 0;
    residency_work work;  ///< only `evict` (none when nothing passes the budget)
  };
  /// Sets device `device`'s budget when `bytes` is not 0. One lowered below what is resident
  /// evicts down to it at once (residency_account::shrink_to_budget: the least recently used
  /// extents no plan holds, contents kept); the work carries those evictions out.
  [[nodiscard]] budget_change budget(int device, std::uint64_t bytes);
  /// Sets `tenant`'s budget on `device` (0 removes it); returns the budget in force.
  [[nodiscard]] std::uint64_t tenant_budget(const std::string& tenant, int device,
                                            std::uint64_t bytes);
  /// The account and the migration ledger.
  [[nodiscard]] residency_report report() const;
  /// `s` with the account's and the ledger's totals (the driver's as last taken in: cheap).
  [[nodiscard]] allocator_stats with_totals(allocator_stats s) const noexcept;
  /// `s` with each region's residency and ledger.
  [[nodiscard]] allocator_snapshot annotated(allocator_snapshot s) const;

  /// Taking the driver's records in: `run()` on a lane (a forced flush of CUPTI's buffers,
  /// about 10 ms on the H100 machine whatever there is to flush: not for the actor's thread),
  /// then `take_in`, under the guard, attributes them to the live regions.
  struct driver_take_in {
    um_counter_subscription* from = nullptr;  // lives as long as the core (incarnation::close)
    std::vector<um_counter_record> records;
    void run() { records = from->drain(); }
  };
  /// A take-in for a lane job; null when the driver's counters are off.
  [[nodiscard]] std::shared_ptr<driver_take_in> driver_take_in_job() const;
  void take_in(const driver_take_in& in);

  /// The allocator freed region `id`. The driver's records for it not taken in yet count as
  /// unattributed when they are.
  void forget(std::uint64_t id) noexcept {
    extents_.forget(id, [this](std::uint64_t extent) { account_.forget(extent); });
    driver_.forget(id);
  }
  /// The incarnation stops: the account goes back to zero.
  void clear() noexcept {
    account_.clear();
    extents_.clear();
  }

  /// Each device's memory: the GPUs', or the host backend's emulated devices' (a supervisor
  /// checks the settings it owns against them).
  [[nodiscard]] static std::vector<std::size_t> devices_of(const backend& b);

 private:
  /// One range a request names, resolved to the live region holding it.
  struct target {
    std::uint64_t region = 0;
    const detail::region* record = nullptr;
    std::size_t offset = 0;
    std::size_t bytes = 0;
  };
  /// The refs' and ranges' regions; invalid_argument (naming `what` and the address) for one
  /// in no live region of this allocator. Changes nothing.
  [[nodiscard]] std::vector<target> targets_of(std::span<const byte_ref> refs,
                                               std::span<const address_range> ranges,
                                               const char* what) const;
  /// The extents covering `targets` (each once, in order of first mention): made for pages no
  /// extent had when `fill` (ids added to `created`), else every page must be planned already.
  /// Splits reach the account at once: they change none of its sums.
  [[nodiscard]] std::vector<std::uint64_t> extents_of(std::span<const target> targets, bool fill,
                                                      std::vector<std::uint64_t>& created,
                                                      const char* what);
  /// Extents in the account as `like`, each with its id, bytes and (new to the account) label.
  [[nodiscard]] std::vector<planned_region> planned(std::span<const std::uint64_t> ids,
                                                    const planned_region& like) const;
  [[nodiscard]] static residency_result summarize(const residency_plan& plan);
  /// The plan's moves as lane jobs (none on the host backend).
  [[nodiscard]] residency_work carry_out(const residency_plan& plan, stream_view stream) const;
  [[nodiscard]] std::string label_of(std::uint64_t id) const;
  /// The label extent `x` counts for: that of the labelled block holding it, if its region is a
  /// slab and one does, else its region's.
  [[nodiscard]] std::string label_of(const region_table::entry& e,
                                     const planned_extents::extent& x) const;
  /// How a refusal names extent `id`: its bytes of its region, and the labelled block holding
  /// them, if any.
  [[nodiscard]] std::string name_of(std::uint64_t id) const;

  std::shared_ptr<backend> backend_;
  const region_table& table_;
  const allocation_core& core_;
  const bool emulated_;  // the host backend: moves to its emulated devices, no data copied
  residency_account account_;
  planned_extents extents_;  // the account's entries: extents of pages of the table's regions
  std::unique_ptr<um_counter_subscription> driver_counters_;
  std::string driver_status_;
  migration_ledger driver_{[this](std::uint64_t id) { return label_of(id); }};
};

}  // namespace uma::detail
