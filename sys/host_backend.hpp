#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <uma/sys/backend.hpp>

namespace uma {

/// The embedded default where no CUDA device is usable, and a real backend for CPU-only
/// deployments: managed regions are page-aligned anonymous mappings; prefetch, advice and discard
/// are recorded per page so that `attributes` answers exactly what was set (as CUDA aggregates
/// per-page state over a range). Discard drops the physical pages (they read back as zeros).
/// Freed regions are poisoned: their pages are replaced by an inaccessible (`PROT_NONE`)
/// mapping with no memory behind it and kept in a quarantine of the most recent frees, so a read
/// or write after free faults instead of reading stale data, the address range is not handed out
/// again while quarantined, and a second free of it is recognised as a double free (instead of
/// freeing a newer region that happens to reuse the address). Past the quarantine the range is
/// unmapped. It has no GPU and no streams (non-null streams are invalid here), but it emulates
/// devices (sys/backend.hpp `emulated_devices`, one by default): `device(n)` is a location that
/// prefetch, advice and attributes accept and record as on CUDA, while the data stays in system
/// memory. It reports itself as `host` everywhere and names its devices "emulated device n".
class host_backend final : public backend {
 public:
  /// Freed regions kept poisoned by default (address space only: they hold no memory).
  static constexpr std::size_t default_quarantine = 1024;

  /// A backend emulating `devices` that keeps the last `quarantine_regions` freed regions
  /// poisoned (0: unmap at once). Throws `error(invalid_argument)` for a device count outside
  /// 0 to emulated_devices::max_count.
  explicit host_backend(emulated_devices devices = {},
                        std::size_t quarantine_regions = default_quarantine);
  /// One emulated device (the default) and a quarantine of `quarantine_regions`.
  explicit host_backend(std::size_t quarantine_regions)
      : host_backend(emulated_devices{}, quarantine_regions) {}
  ~host_backend() override;

  [[nodiscard]] backend_kind kind() const noexcept override { return backend_kind::host; }
  [[nodiscard]] std::string description() const override;
  [[nodiscard]] int device_count() const noexcept override {
    return static_cast<int>(devices_.size());
  }
  [[nodiscard]] const device_capabilities& capabilities(int ordinal) const override;
  [[nodiscard]] int host_numa_nodes() const noexcept override { return numa_nodes_; }
  [[nodiscard]] std::size_t guaranteed_alignment() const noexcept override { return page_size_; }
  [[nodiscard]] std::size_t default_quota() const override;

  [[nodiscard]] void* allocate_managed(std::size_t bytes, attach_flag attach) override;
  void free_managed(void* ptr, std::size_t bytes) noexcept override;
  [[nodiscard]] void* allocate_tier(memory_kind kind, std::size_t bytes, int device) override;
  void free_tier(memory_kind kind, void* ptr, std::size_t bytes, int device) noexcept override;
  void copy(void* dst, const void* src, std::size_t bytes, stream_view stream) override;
  void prefetch(std::span<const byte_range> ranges, std::span<const location> locations,
                stream_view stream) override;
  void discard(std::span<const byte_range> ranges, stream_view stream) override;
  void discard_prefetch(std::span<const byte_range> ranges, std::span<const location> locations,
                        stream_view stream) override;
  void advise(byte_range range, advice a, location loc) override;
  [[nodiscard]] range_attributes attributes(byte_range range) override;

  [[nodiscard]] memory_kind kind_of(const void* ptr) override;
  [[nodiscard]] bool is_capturing(stream_view stream) override;
  void launch_host_func(stream_view stream, void (*fn)(void*), void* arg) override;
  void wait_stream(stream_view stream) override;
  void synchronize() override {}

  [[nodiscard]] backend_counters counters() const noexcept override;

  /// True when `[ptr, ptr + bytes)` lies inside one live (allocated, not yet freed) region: what a
  /// test checks a pin against.
  [[nodiscard]] bool is_live(const void* ptr, std::size_t bytes) const;
  /// True when `ptr` lies inside a freed region that is still quarantined (poisoned).
  [[nodiscard]] bool is_quarantined(const void* ptr) const;

 private:
  struct page_state {
    bool read_mostly = false;
    std::optional<location> preferred;
    std::vector<location> accessed_by;  // sorted
    std::optional<location> last_prefetch;
  };
  struct mapping {
    std::size_t bytes = 0;                 // as requested
    memory_kind tier = memory_kind::host;  // host: managed memory; else the tier it emulates
    std::size_t mapped_bytes = 0;          // rounded up to pages
    std::vector<page_state> pages;         // one per page
  };
  struct page_span {
    mapping* map;
    std::size_t first;
    std::size_t last;  // exclusive
  };

  page_span pages_of(byte_range range, const char* operation);  // mutex_ held
  location resolve(location loc, const char* operation) const;
  void check_stream(stream_view stream, const char* operation) const;
  void record_prefetch(std::span<const byte_range> ranges, std::span<const location> locations,
                       const char* operation);
  void drop_pages(byte_range range);  // mutex_ held
  void poison(void* ptr, std::size_t mapped) noexcept;
  /// Page-aligned system memory, registered as `tier` (host: managed); what allocate_managed and
  /// allocate_tier share. `what` names the call in errors.
  [[nodiscard]] void* map_pages(std::size_t bytes, memory_kind tier, const char* what);
  /// Unmaps what map_pages returned as `tier`; false (counted, logged) when it is not that.
  bool unmap_pages(void* ptr, std::size_t bytes, memory_kind tier, const char* what) noexcept;
  [[nodiscard]] bool is_quarantined_locked(const void* ptr) const noexcept;  // mutex_ held

  /// Throws invalid_argument naming `what` unless `ordinal` is an emulated device.
  void check_device(int ordinal, const std::string& what) const;

  std::size_t page_size_;
  int numa_nodes_;
  std::vector<device_capabilities> devices_;  // the emulated ones
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, mapping> mappings_;
  const std::size_t quarantine_limit_;
  std::deque<std::pair<std::uintptr_t, std::size_t>>
      quarantine_;  // base, mapped bytes; oldest first
  std::atomic<std::uint64_t> allocations_{0}, frees_{0}, bad_frees_{0}, prefetch_calls_{0},
      batch_calls_{0}, discard_calls_{0}, advise_calls_{0}, live_bytes_{0}, tier_allocations_{0},
      tier_frees_{0}, copies_{0}, copy_bytes_{0};
};

}  // namespace uma
