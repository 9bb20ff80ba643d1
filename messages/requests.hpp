#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <uma/memory/copy_ledger.hpp>
#include <uma/memory/device_residency.hpp>
#include <uma/memory/managed_ref.hpp>
#include <uma/memory/migration_ledger.hpp>
#include <uma/memory/residency_types.hpp>
#include <uma/memory/vocabulary.hpp>
#include <uma/messages/memory_requests.hpp>
#include <uma/sys/advice.hpp>
#include <uma/sys/backend.hpp>
#include <uma/sys/location.hpp>

namespace uma {

/// Bytes [address, address + bytes) of memory this allocator handed out, by address: a block
/// of the block allocator (the C ABI's uma_malloc), part of one, or part of any live region.
/// Plans round it outward to whole pages of its region (docs/residency.md "Ranges").
struct address_range {
  std::uintptr_t address = 0;
  std::size_t bytes = 0;
  friend bool operator==(const address_range&, const address_range&) = default;
};

/// An access plan (issue 15, docs/residency.md): the pages of `refs` (each ref's own bytes: a
/// direct region whole, a block just its pages) and of `ranges` are about to be used on
/// `device` in `mode` under `policy`. The allocator places them (evicting others first when the
/// device's budget needs it) and holds them until done_with.
struct access_plan_request {
  std::vector<byte_ref> refs{};
  int device = 0;
  access_mode mode = access_mode::read;
  residency_policy policy = residency_policy::automatic;
  /// The moves' stream; none: each lane's own (cudaStreamPerThread of the lane's thread), so
  /// evictions and placements run at once. Name your stream to order them before your kernels.
  stream_view stream{};
  /// The reply comes once the placements were issued (`enqueued`: the prefetch calls returned)
  /// or once their stream finished them (`complete`).
  completion reply_when = completion::enqueued;
  /// The tenant the plan's regions count for (docs/residency.md "Tenants"), fixed by a region's
  /// first plan; "" for none. A tenant with a budget on `device` makes room among its own
  /// regions first, and a plan past its budget is refused.
  std::string tenant{};
  /// The cycle the caller runs the plan in (its sequence's set and steps; none: unknown): the
  /// `automatic` policy's hint (docs/residency.md "Policies"). access_sequence sets it.
  cycle_hint cycle{};
  /// Ranges by address, planned beside `refs`; each must lie inside one live region of this
  /// allocator (invalid_argument naming the address, nothing changes).
  std::vector<address_range> ranges{};
};

/// Reply to an access plan or to dead: the moves queued, by kind, and their bytes.
struct residency_result {
  std::uint64_t to_device_bytes = 0;  ///< host -> device prefetches
  std::uint64_t to_host_bytes = 0;    ///< device -> host prefetches (evictions)
  std::uint64_t dropped_bytes = 0;    ///< read-mostly copies dropped (nothing moves)
  std::uint64_t discarded_bytes = 0;  ///< contents discarded (nothing moves)
  std::uint64_t mapped_bytes = 0;     ///< mapped remotely (nothing moves)
  std::uint32_t placements = 0;
  std::uint32_t evictions = 0;
  /// Of the plan's bytes, those its budgets could not hold, mapped remotely for the device
  /// instead (`residency_budgets::overflow` = budget_overflow::map; docs/residency.md
  /// "Overflow"): in `mapped_bytes` too when the mapping was made now. 0 under `refuse`.
  std::uint64_t overflow_bytes = 0;
  friend bool operator==(const residency_result&, const residency_result&) = default;
};

/// The ledger of the regions that carry one label (a tenant, a buffer family), freed ones
/// included.
struct label_residency {
  std::string label{};
  residency_ledger moves{};  ///< uma's own moves
  driver_ledger driver{};    ///< the driver's counters (zero when there are none)
};

/// One tenant's account on each device.
struct tenant_residency {
  std::string tenant{};
  std::vector<device_residency> devices{};  ///< by device ordinal
};

/// Reply to residency_atom: each device's account and the migration ledger (docs/residency.md):
/// uma's own moves and, where the driver reports them, its unified-memory counters, summed over
/// every region and per label.
struct residency_report {
  std::vector<device_residency> devices{};
  residency_ledger totals{};
  std::string moves;  ///< how the moves are made: by the backend, or counted only (host backend)
  /// The driver's counters: on (`allocator_config::backend.driver_counters` and the backend has
  /// them), with their source in `driver_counters`, or off with the reason there.
  bool driver_counters_on = false;
  std::string driver_counters{};
  driver_ledger driver_totals{};        ///< every record, attributed or not
  driver_ledger driver_unattributed{};  ///< at addresses no live region of this allocator held
  std::uint64_t driver_records_dropped = 0;
  std::vector<label_residency> labels{};    ///< sorted by label
  std::vector<tenant_residency> tenants{};  ///< with a budget or bytes placed so far, sorted
  /// Bytes of live regions that no plan covers (block allocator slabs whole, their free blocks
  /// included): memory the account does not keep, which the device may still fault in
  /// (docs/residency.md "Memory outside every plan").
  std::uint64_t unplanned_bytes = 0;
  /// The copy engines' moves between the allocator's memory (docs/design.md "Tiers"), beside
  /// the plans' moves and the driver's.
  copy_counts copies{};
};

}  // namespace uma
