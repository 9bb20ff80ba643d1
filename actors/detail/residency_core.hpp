#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <uma/actors/allocator_config.hpp>
#include <uma/memory/allocator_snapshot.hpp>
#include <uma/memory/detail/region_table.hpp>
#include <uma/memory/migration_ledger.hpp>
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
/// lane). Plans act on whole regions: a ref of a leased block stands for its lease's region.
/// On the host backend the devices are its emulated ones and the moves are recorded by it
/// (counted, no data copied). Actor-thread only; throws uma::error (nothing changed).
class residency_core {
 public:
  /// `label_of(data)`: the label of the region whose data starts at `data` (the ledger's
  /// per-label sums).
  residency_core(const allocator_config& config, std::shared_ptr<backend> backend,
                 const region_table& table, std::function<std::string(const void*)> label_of);

  /// Throws what the constructor would for `config`'s device budgets (invalid_argument naming
  /// the device and the bytes).
  static void check(const allocator_config& config, const backend& b);

  [[nodiscard]] residency_work will_access(const access_plan_request& r);
  [[nodiscard]] std::uint64_t done_with(std::span<const byte_ref> refs);
  [[nodiscard]] residency_work dead(std::span<const byte_ref> refs, stream_view stream);
  /// Sets device `device`'s budget when `bytes` is not 0; returns the budget in force.
  [[nodiscard]] std::uint64_t budget(int device, std::uint64_t bytes);
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
  /// then `take_in` on the actor's thread attributes them to the live regions.
  struct driver_take_in {
    um_counter_subscription* from = nullptr;  // lives as long as the core (the lanes go first)
    std::vector<um_counter_record> records;
    void run() { records = from->drain(); }
  };
  /// A take-in for a lane job; null when the driver's counters are off.
  [[nodiscard]] std::shared_ptr<driver_take_in> driver_take_in_job() const;
  void take_in(const driver_take_in& in);

  /// The allocator freed region `id`. The driver's records for it not taken in yet count as
  /// unattributed when they are.
  void forget(std::uint64_t id) noexcept {
    account_.forget(id);
    driver_.forget(id);
  }
  /// The incarnation stops: the account goes back to zero.
  void clear() noexcept { account_.clear(); }

 private:
  /// Each device's memory: the GPUs', or the host backend's emulated devices'.
  [[nodiscard]] static std::vector<std::size_t> devices_of(const backend& b);
  /// The table's regions of `refs` (one per region, in order of first mention), each as `like`
  /// with its id, bytes and (for a region new to the account) its label.
  [[nodiscard]] std::vector<planned_region> regions_of(std::span<const byte_ref> refs,
                                                       const planned_region& like) const;
  [[nodiscard]] static residency_result summarize(const residency_plan& plan);
  /// The plan's moves as lane jobs (none on the host backend).
  [[nodiscard]] residency_work carry_out(const residency_plan& plan, stream_view stream) const;
  [[nodiscard]] std::string label_of(std::uint64_t id) const;

  std::shared_ptr<backend> backend_;
  const region_table& table_;
  std::function<std::string(const void*)> label_of_;
  const bool emulated_;  // the host backend: moves to its emulated devices, no data copied
  residency_account account_;
  std::unique_ptr<um_counter_subscription> driver_counters_;
  std::string driver_status_;
  migration_ledger driver_{[this](std::uint64_t id) { return label_of(id); }};
};

}  // namespace uma::detail
