#include <uma/sys/host_backend.hpp>

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <uma/sys/detail/format.hpp>
#include <uma/sys/error.hpp>
#include <uma/sys/log.hpp>

namespace uma {

namespace {

int count_numa_nodes() {
  int n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const auto name = entry.path().filename().string();
    if (name.size() > 4 && name.compare(0, 4, "node") == 0 &&
        std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      ++n;
  }
  return std::max(n, 1);
}

int current_numa_node() {
  unsigned cpu = 0, node = 0;
  if (getcpu(&cpu, &node) != 0)
    return 0;
  return static_cast<int>(node);
}

/// What an emulated device honestly is: managed memory that the host and the "device" may touch
/// at the same time (it is all system memory), no compute capability, no memory pools.
device_capabilities emulated_device(int ordinal, std::size_t memory) {
  device_capabilities c;
  c.ordinal = ordinal;
  c.name = "emulated device " + std::to_string(ordinal);
  c.total_memory = memory;
  c.managed_memory = true;
  c.concurrent_managed_access = true;
  c.direct_managed_access_from_host = true;
  c.batch_api = true;  // a batch of ranges is one call here, as with CUDA 13's batch entry points
  return c;
}

}  // namespace

host_backend::host_backend(emulated_devices devices, std::size_t quarantine_regions)
    : page_size_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))),
      numa_nodes_(count_numa_nodes()),
      quarantine_limit_(quarantine_regions) {
  if (devices.count < 0 || devices.count > emulated_devices::max_count)
    raise(errc::invalid_argument, "host backend: " + std::to_string(devices.count) +
                                      " emulated devices asked for; 0 to " +
                                      std::to_string(emulated_devices::max_count) + " allowed");
  const std::size_t memory =
      devices.memory_bytes != 0 ? static_cast<std::size_t>(devices.memory_bytes) : default_quota();
  for (int d = 0; d < devices.count; ++d)
    devices_.push_back(emulated_device(d, memory));
}

host_backend::~host_backend() {
  // Regions still mapped here were leaked on purpose by an allocator (a pin outlived its drain
  // timeout); the mapping goes with the process, never under a reader. Quarantined ranges are
  // this backend's own reservations: they go with it.
  for (const auto& [base, mapped] : quarantine_)
    munmap(reinterpret_cast<void*>(base), mapped);
}

std::string host_backend::description() const {
  std::string out = "host: system memory, " + std::to_string(numa_nodes_) +
                    " NUMA node(s), page size " + std::to_string(page_size_) + ", no GPU, " +
                    std::to_string(devices_.size()) + " emulated device(s)";
  if (!devices_.empty())
    out += " of " + detail::bytes(devices_.front().total_memory) + " each";
  return out;
}

void host_backend::check_device(int ordinal, const std::string& what) const {
  if (ordinal < 0 || ordinal >= device_count())
    raise(errc::invalid_argument, what + " does not exist: the host backend emulates " +
                                      std::to_string(device_count()) + " device(s)");
}

const device_capabilities& host_backend::capabilities(int ordinal) const {
  check_device(ordinal, "device " + std::to_string(ordinal));
  return devices_[static_cast<std::size_t>(ordinal)];
}

std::size_t host_backend::default_quota() const {
  const auto pages = sysconf(_SC_PHYS_PAGES);
  return pages > 0 ? static_cast<std::size_t>(pages) * page_size_ / 2 : std::size_t{1} << 30;
}

void* host_backend::map_pages(std::size_t bytes, memory_kind tier, const char* what) {
  if (bytes == 0)
    raise(errc::invalid_argument, std::string("host ") + what + ": zero bytes requested");
  const std::size_t mapped = (bytes + page_size_ - 1) / page_size_ * page_size_;
  if (mapped < bytes)
    raise(errc::overflow, std::string("host ") + what + ": " + detail::bytes(bytes) +
                              " does not round up to whole pages");
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    raise(err == ENOMEM ? errc::out_of_memory : errc::backend_error,
          "mmap(" + detail::bytes(mapped) + ") failed: " + std::strerror(err));
  }
  {
    std::lock_guard lock(mutex_);
    mappings_.emplace(reinterpret_cast<std::uintptr_t>(p),
                      mapping{bytes, tier, mapped, std::vector<page_state>(mapped / page_size_)});
  }
  live_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return p;
}

bool host_backend::unmap_pages(void* ptr, std::size_t bytes, memory_kind tier,
                               const char* what) noexcept {
  std::size_t mapped = 0;
  {
    std::lock_guard lock(mutex_);
    auto it = mappings_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == mappings_.end() || it->second.bytes != bytes || it->second.tier != tier) {
      bad_frees_.fetch_add(1, std::memory_order_relaxed);
      const bool twice = it == mappings_.end() && is_quarantined_locked(ptr);
      log(log_level::warning,
          std::string("host ") + what + "(" + detail::hex(ptr) + ", " + std::to_string(bytes) +
              " bytes): " +
              (twice ? "double free (the region was freed before and is quarantined)"
               : it != mappings_.end() && it->second.tier != tier
                   ? "freed as another kind of memory than it was allocated as"
                   : "not a live allocation"));
      return false;
    }
    mapped = it->second.mapped_bytes;
    mappings_.erase(it);
  }
  poison(ptr, mapped);
  live_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  return true;
}

void* host_backend::allocate_managed(std::size_t bytes, attach_flag) {
  void* p = map_pages(bytes, memory_kind::host, "allocate_managed");
  allocations_.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void host_backend::free_managed(void* ptr, std::size_t bytes) noexcept {
  if (unmap_pages(ptr, bytes, memory_kind::host, "free_managed"))
    frees_.fetch_add(1, std::memory_order_relaxed);
}

void* host_backend::allocate_tier(memory_kind kind, std::size_t bytes, int device) {
  if (kind != memory_kind::pinned_host && kind != memory_kind::cuda_device)
    raise(errc::invalid_argument, "host allocate_tier: " + std::string(to_string(kind)) +
                                      " is not a tier (pinned_host or cuda_device)");
  if (kind == memory_kind::cuda_device)
    check_device(device, "allocate_tier: device " + std::to_string(device));
  void* p = map_pages(bytes, kind, "allocate_tier");
  tier_allocations_.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void host_backend::free_tier(memory_kind kind, void* ptr, std::size_t bytes, int) noexcept {
  if (unmap_pages(ptr, bytes, kind, "free_tier"))
    tier_frees_.fetch_add(1, std::memory_order_relaxed);
}

void host_backend::copy(void* dst, const void* src, std::size_t bytes, stream_view stream) {
  check_stream(stream, "copy");
  std::memmove(dst, src, bytes);  // the caller refused overlaps; memmove costs nothing more
  copies_.fetch_add(1, std::memory_order_relaxed);
  copy_bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

void host_backend::poison(void* ptr, std::size_t mapped) noexcept {
  // MAP_FIXED replaces the pages in one step: the memory goes back to the system, the range
  // stays reserved (no later mmap can reuse it) and any access through a stale pointer faults.
  if (quarantine_limit_ == 0 ||
      mmap(ptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
           0) == MAP_FAILED) {
    if (munmap(ptr, mapped) != 0)
      log(log_level::error, "munmap(" + detail::hex(ptr) + ", " + std::to_string(mapped) +
                                " bytes) failed: " + std::strerror(errno));
    return;
  }
  std::pair<std::uintptr_t, std::size_t> evicted{0, 0};
  try {
    std::lock_guard lock(mutex_);
    quarantine_.emplace_back(reinterpret_cast<std::uintptr_t>(ptr), mapped);
    if (quarantine_.size() > quarantine_limit_) {
      evicted = quarantine_.front();
      quarantine_.pop_front();
    }
  } catch (...) {
    evicted = {reinterpret_cast<std::uintptr_t>(ptr), mapped};  // no room to remember it
  }
  if (evicted.second != 0)
    munmap(reinterpret_cast<void*>(evicted.first), evicted.second);
}

bool host_backend::is_live(const void* ptr, std::size_t bytes) const {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(mutex_);
  auto it = mappings_.upper_bound(addr);
  if (it == mappings_.begin())
    return false;
  --it;
  const std::size_t offset = addr - it->first;
  return offset < it->second.bytes && bytes <= it->second.bytes - offset;
}

bool host_backend::is_quarantined(const void* ptr) const {
  std::lock_guard lock(mutex_);
  return is_quarantined_locked(ptr);
}

bool host_backend::is_quarantined_locked(const void* ptr) const noexcept {
  const auto addr = reinterpret_cast<std::uintptr_t>(ptr);
  return std::any_of(quarantine_.begin(), quarantine_.end(), [addr](const auto& q) {
    return addr >= q.first && addr - q.first < q.second;
  });
}

host_backend::page_span host_backend::pages_of(byte_range range, const char* operation) {
  const auto addr = reinterpret_cast<std::uintptr_t>(range.ptr);
  auto it = mappings_.upper_bound(addr);
  if (it == mappings_.begin() || range.bytes == 0)
    raise(errc::invalid_argument, std::string(operation) + ": range " + detail::hex(range.ptr) +
                                      " + " + detail::bytes(range.bytes) +
                                      " is not inside a host managed allocation");
  --it;
  const std::size_t offset = addr - it->first;
  if (offset >= it->second.bytes || range.bytes > it->second.bytes - offset ||
      it->second.tier != memory_kind::host)
    raise(errc::invalid_argument, std::string(operation) + ": range " + detail::hex(range.ptr) +
                                      " + " + detail::bytes(range.bytes) +
                                      " is not inside a host managed allocation");
  return {&it->second, offset / page_size_, (offset + range.bytes + page_size_ - 1) / page_size_};
}

location host_backend::resolve(location loc, const char* operation) const {
  switch (loc.type) {
    case location::kind::device:
      check_device(loc.id, std::string(operation) + ": " + to_string(loc));
      return loc;
    case location::kind::host_numa:
      if (loc.id < 0 || loc.id >= numa_nodes_)
        raise(errc::invalid_argument, std::string(operation) + ": " + to_string(loc) +
                                          " does not exist (" + std::to_string(numa_nodes_) +
                                          " NUMA node(s))");
      return loc;
    case location::kind::host_numa_current:
      return location::host_numa(std::min(current_numa_node(), numa_nodes_ - 1));
    case location::kind::host:
      return location::host();
  }
  raise(errc::invalid_argument, std::string(operation) + ": unknown location kind");
}

void host_backend::check_stream(stream_view stream, const char* operation) const {
  if (stream.handle != nullptr)
    raise(errc::invalid_argument, std::string(operation) + ": stream " +
                                      detail::hex(stream.handle) +
                                      " given, but the host backend has no CUDA streams");
}

void host_backend::record_prefetch(std::span<const byte_range> ranges,
                                   std::span<const location> locations, const char* operation) {
  check_stream({}, operation);
  if (!ranges.empty() && locations.size() != 1 && locations.size() != ranges.size())
    raise(errc::invalid_argument, std::string(operation) + ": " + std::to_string(ranges.size()) +
                                      " ranges but " + std::to_string(locations.size()) +
                                      " locations (need 1 or one per range)");
  std::vector<location> resolved;
  resolved.reserve(locations.size());
  for (const auto& loc : locations)
    resolved.push_back(resolve(loc, operation));
  std::lock_guard lock(mutex_);
  std::vector<page_span> spans;
  spans.reserve(ranges.size());
  for (const auto& r : ranges)
    spans.push_back(pages_of(r, operation));  // validate all first
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const auto& loc = resolved[resolved.size() == 1 ? 0 : i];
    for (auto p = spans[i].first; p < spans[i].last; ++p)
      spans[i].map->pages[p].last_prefetch = loc;
  }
}

void host_backend::prefetch(std::span<const byte_range> ranges, std::span<const location> locations,
                            stream_view stream) {
  check_stream(stream, "prefetch");
  record_prefetch(ranges, locations, "prefetch");
  (ranges.size() > 1 ? batch_calls_ : prefetch_calls_).fetch_add(1, std::memory_order_relaxed);
}

void host_backend::drop_pages(byte_range range) {
  // Only whole pages can be dropped; a partial page at either end keeps its contents, as the
  // contents of a discarded range are undefined anyway.
  const auto begin = reinterpret_cast<std::uintptr_t>(range.ptr);
  const auto first = (begin + page_size_ - 1) / page_size_ * page_size_;
  const auto last = (begin + range.bytes) / page_size_ * page_size_;
  if (last > first)
    madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);  // best effort
}

void host_backend::discard(std::span<const byte_range> ranges, stream_view stream) {
  check_stream(stream, "discard");
  std::lock_guard lock(mutex_);
  for (const auto& r : ranges)
    (void)pages_of(r, "discard");
  for (const auto& r : ranges)
    drop_pages(r);
  (ranges.size() > 1 ? batch_calls_ : discard_calls_).fetch_add(1, std::memory_order_relaxed);
}

void host_backend::discard_prefetch(std::span<const byte_range> ranges,
                                    std::span<const location> locations, stream_view stream) {
  check_stream(stream, "discard_prefetch");
  record_prefetch(ranges, locations, "discard_prefetch");
  {
    std::lock_guard lock(mutex_);
    for (const auto& r : ranges)
      drop_pages(r);
  }
  (ranges.size() > 1 ? batch_calls_ : discard_calls_).fetch_add(1, std::memory_order_relaxed);
}

void host_backend::advise(byte_range range, advice a, location loc) {
  if (advice_takes_location(a))
    loc = resolve(loc, "advise");
  std::lock_guard lock(mutex_);
  const auto span = pages_of(range, "advise");
  for (auto p = span.first; p < span.last; ++p) {
    auto& page = span.map->pages[p];
    switch (a) {
      case advice::set_read_mostly:
        page.read_mostly = true;
        break;
      case advice::unset_read_mostly:
        page.read_mostly = false;
        break;
      case advice::set_preferred_location:
        page.preferred = loc;
        break;
      case advice::unset_preferred_location:
        page.preferred.reset();
        break;
      case advice::set_accessed_by: {
        auto pos = std::lower_bound(page.accessed_by.begin(), page.accessed_by.end(), loc);
        if (pos == page.accessed_by.end() || *pos != loc)
          page.accessed_by.insert(pos, loc);
        break;
      }
      case advice::unset_accessed_by:
        std::erase(page.accessed_by, loc);
        break;
    }
  }
  advise_calls_.fetch_add(1, std::memory_order_relaxed);
}

range_attributes host_backend::attributes(byte_range range) {
  std::lock_guard lock(mutex_);
  const auto span = pages_of(range, "attributes");
  const auto& first = span.map->pages[span.first];
  range_attributes out{first.read_mostly, first.preferred, first.accessed_by, first.last_prefetch};
  for (auto p = span.first + 1; p < span.last; ++p) {
    const auto& page = span.map->pages[p];
    out.read_mostly = out.read_mostly && page.read_mostly;
    if (out.preferred_location != page.preferred)
      out.preferred_location.reset();
    if (out.last_prefetch_location != page.last_prefetch)
      out.last_prefetch_location.reset();
    std::vector<location> common;
    std::set_intersection(out.accessed_by.begin(), out.accessed_by.end(), page.accessed_by.begin(),
                          page.accessed_by.end(), std::back_inserter(common));
    out.accessed_by = std::move(common);
  }
  return out;
}

memory_kind host_backend::kind_of(const void* ptr) {
  // Without a CUDA runtime every non-null pointer is plain system memory.
  return ptr == nullptr ? memory_kind::unknown : memory_kind::host;
}

bool host_backend::is_capturing(stream_view stream) {
  check_stream(stream, "is_capturing");
  return false;
}

void host_backend::wait_stream(stream_view stream) {
  check_stream(stream, "wait_stream");  // its work is synchronous: nothing to wait for
}

void host_backend::launch_host_func(stream_view stream, void (*fn)(void*), void* arg) {
  check_stream(stream, "launch_host_func");
  fn(arg);  // host work is synchronous: the stream has already reached this point
}

backend_counters host_backend::counters() const noexcept {
  backend_counters c;
  c.allocations = allocations_.load(std::memory_order_relaxed);
  c.frees = frees_.load(std::memory_order_relaxed);
  c.bad_frees = bad_frees_.load(std::memory_order_relaxed);
  c.prefetch_calls = prefetch_calls_.load(std::memory_order_relaxed);
  c.batch_calls = batch_calls_.load(std::memory_order_relaxed);
  c.discard_calls = discard_calls_.load(std::memory_order_relaxed);
  c.advise_calls = advise_calls_.load(std::memory_order_relaxed);
  c.live_allocations = c.allocations + tier_allocations_.load(std::memory_order_relaxed) - c.frees -
                       tier_frees_.load(std::memory_order_relaxed);
  c.live_bytes = live_bytes_.load(std::memory_order_relaxed);
  c.tier_allocations = tier_allocations_.load(std::memory_order_relaxed);
  c.tier_frees = tier_frees_.load(std::memory_order_relaxed);
  c.copies = copies_.load(std::memory_order_relaxed);
  c.copy_bytes = copy_bytes_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace uma
