#include <uma/memory/migration_ledger.hpp>

#include <algorithm>
#include <utility>

namespace uma {

driver_ledger& driver_ledger::operator+=(const driver_ledger& o) noexcept {
  to_device_bytes += o.to_device_bytes;
  to_host_bytes += o.to_host_bytes;
  prefetched_to_device_bytes += o.prefetched_to_device_bytes;
  prefetched_to_host_bytes += o.prefetched_to_host_bytes;
  cpu_page_faults += o.cpu_page_faults;
  gpu_page_faults += o.gpu_page_faults;
  thrashing_bytes += o.thrashing_bytes;
  throttled += o.throttled;
  remote_map_bytes += o.remote_map_bytes;
  return *this;
}

void count(driver_ledger& l, const um_counter_record& r, std::uint64_t bytes) noexcept {
  switch (r.kind) {
    case um_counter_kind::to_device_bytes:
      l.to_device_bytes += bytes;
      l.prefetched_to_device_bytes += r.prefetch ? bytes : 0;
      break;
    case um_counter_kind::to_host_bytes:
      l.to_host_bytes += bytes;
      l.prefetched_to_host_bytes += r.prefetch ? bytes : 0;
      break;
    case um_counter_kind::cpu_page_fault:
      l.cpu_page_faults += 1;
      break;
    case um_counter_kind::gpu_page_fault:
      l.gpu_page_faults += r.value;
      break;
    case um_counter_kind::thrashing:
      l.thrashing_bytes += bytes;
      break;
    case um_counter_kind::throttling:
      l.throttled += 1;
      break;
    case um_counter_kind::remote_map:
      l.remote_map_bytes += bytes;
      break;
  }
}

namespace {

/// Records whose `value` is a byte count over [address, address + value).
bool spans_bytes(um_counter_kind k) noexcept {
  return k == um_counter_kind::to_device_bytes || k == um_counter_kind::to_host_bytes ||
         k == um_counter_kind::thrashing || k == um_counter_kind::remote_map;
}

}  // namespace

migration_ledger::migration_ledger(std::function<std::string(std::uint64_t)> label_of)
    : label_of_(std::move(label_of)) {}

void migration_ledger::count_in(std::uint64_t region, const um_counter_record& r,
                                std::uint64_t bytes) {
  auto it = regions_.find(region);
  if (it == regions_.end())
    it = regions_.emplace(region, entry{label_of_ ? label_of_(region) : std::string{}, {}}).first;
  count(it->second.ledger, r, bytes);
  count(by_label_[it->second.label], r, bytes);
}

void migration_ledger::add(std::span<const um_counter_record> records,
                           std::span<const ledger_range> ranges) {
  for (const auto& r : records) {
    const bool bytes = spans_bytes(r.kind);
    const std::uint64_t begin = r.address;
    // A byte record past the address space's end is cut there (a driver record never is).
    const std::uint64_t end = bytes ? begin + std::min(r.value, ~begin) : begin + 1;
    count(totals_, r, bytes ? end - begin : 0);
    // The last range starting at or before `begin`, then every range that starts before `end`.
    auto it = std::upper_bound(ranges.begin(), ranges.end(), begin,
                               [](std::uint64_t a, const ledger_range& x) { return a < x.begin; });
    if (it != ranges.begin())
      --it;
    std::uint64_t covered = 0;
    bool held = false;
    for (; it != ranges.end() && it->begin < end; ++it) {
      const std::uint64_t lo = std::max(it->begin, begin);
      const std::uint64_t hi = std::min(it->end, end);
      if (lo >= hi)
        continue;
      held = true;
      covered += hi - lo;
      count_in(it->region, r, bytes ? hi - lo : 0);
      if (!bytes)
        break;
    }
    if (bytes ? covered < end - begin : !held)
      count(unattributed_, r, bytes ? end - begin - covered : 0);
  }
}

void migration_ledger::forget(std::uint64_t id) {
  regions_.erase(id);
}

const driver_ledger* migration_ledger::region(std::uint64_t id) const noexcept {
  auto it = regions_.find(id);
  return it == regions_.end() ? nullptr : &it->second.ledger;
}

}  // namespace uma
