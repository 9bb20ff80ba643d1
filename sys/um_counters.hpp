#pragma once

// The driver's unified-memory counters (issue 15, docs/residency.md "Migration ledger"): what
// the driver moved and faulted, by address, whoever caused it. On the CUDA backend they come
// from CUPTI's activity API (sys/cuda_cupti.cpp, loaded at run time); the host backend has none.
// CUDA-free: records carry plain addresses and values.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace uma {

/// What one driver record counts.
enum class um_counter_kind : std::uint8_t {
  to_device_bytes,  ///< `value` bytes moved host -> device
  to_host_bytes,    ///< `value` bytes moved device -> host
  cpu_page_fault,   ///< one CPU page fault on the page at `address`
  gpu_page_fault,   ///< `value` GPU fault groups on the page at `address`
  thrashing,        ///< the driver saw `value` bytes at `address` thrash between processors
  throttling,       ///< the driver throttled faults on the page at `address`
  remote_map,       ///< `value` bytes at `address` mapped remotely instead of migrated
};

/// One driver record, as uma keeps it.
struct um_counter_record {
  um_counter_kind kind = um_counter_kind::to_device_bytes;
  /// For moves: caused by an explicit prefetch (uma's or anyone's), not by a fault or an
  /// eviction of the driver's own.
  bool prefetch = false;
  std::uint64_t address = 0;
  std::uint64_t value = 0;
};

/// One consumer's share of the process-wide counters: every record the driver delivers from the
/// subscription on, until it is destroyed. Thread-safe.
class um_counter_subscription {
 public:
  um_counter_subscription() = default;
  um_counter_subscription(const um_counter_subscription&) = delete;
  um_counter_subscription& operator=(const um_counter_subscription&) = delete;
  virtual ~um_counter_subscription() = default;

  /// Asks the driver for what it has buffered (a forced flush: the call blocks for its
  /// duration) and returns every record since the last drain, oldest first.
  [[nodiscard]] virtual std::vector<um_counter_record> drain() = 0;
  /// Records lost since the subscription began: the driver's dropped records, and those past
  /// the subscription's bound (records nobody drained).
  [[nodiscard]] virtual std::uint64_t dropped() const noexcept = 0;
  /// Where the records come from ("CUPTI 13.0 unified-memory counters").
  [[nodiscard]] virtual std::string source() const = 0;
};

/// A subscription, or why there is none.
struct um_counter_source {
  std::unique_ptr<um_counter_subscription> subscription;
  std::string why_not;  ///< set when `subscription` is null
};

/// The records a subscription keeps for its consumer before it counts more as dropped.
inline constexpr std::size_t um_counter_bound = std::size_t{1} << 18;

}  // namespace uma
