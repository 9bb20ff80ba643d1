#include <uma/actors/c/c_torch_ledger.hpp>

#include <algorithm>

#include <boost/json.hpp>

namespace uma::c {

namespace {

constexpr std::size_t minimum_block = 512;                 // c10's kMinBlockSize
constexpr std::size_t small_limit = std::size_t{1} << 20;  // c10's kSmallSize
constexpr std::size_t all = 0;
constexpr std::array<const char*, torch_pools> pool_names{"all", "small_pool", "large_pool"};

void put(boost::json::object& out, const std::string& name, const torch_stat& s) {
  out[name + ".current"] = s.current;
  out[name + ".peak"] = s.peak;
  out[name + ".allocated"] = s.allocated;
  out[name + ".freed"] = s.freed;
}

void put(boost::json::object& out, const char* name,
         const std::array<torch_stat, torch_pools>& stats) {
  for (std::size_t p = 0; p < torch_pools; ++p)
    put(out, std::string(name) + "." + pool_names[p], stats[p]);
}

template <class F>
void each_stat(torch_device_ledger& d, F&& f) {
  for (auto* family : {&d.allocation, &d.allocated_bytes, &d.requested_bytes})
    for (auto& s : *family)
      f(s);
  f(d.reserved_bytes);
}

}  // namespace

void torch_stat::add(std::int64_t amount) noexcept {
  current += amount;
  allocated += amount;
  peak = std::max(peak, current);
}

void torch_stat::remove(std::int64_t amount) noexcept {
  current -= amount;
  freed += amount;
}

std::size_t torch_ledger::rounded(std::size_t size) noexcept {
  if (size < minimum_block)
    return minimum_block;
  return minimum_block * ((size + minimum_block - 1) / minimum_block);
}

bool torch_ledger::small(std::size_t size) noexcept {
  return rounded(size) <= small_limit;
}

bool torch_ledger::counted(int device) const noexcept {
  return device >= 0 && device < max_devices;
}

torch_ledger::after_allocation torch_ledger::allocated(int device, std::uintptr_t ptr,
                                                       std::size_t size,
                                                       std::uintptr_t stream) noexcept {
  if (!counted(device))
    return {};
  const auto pool = small(size) ? 1u : 2u;
  const auto bytes = static_cast<std::int64_t>(rounded(size));
  std::lock_guard lock(mutex_);
  auto& d = devices_[device];
  const auto peak_before = d.allocated_bytes[all].peak;
  for (auto p : {all, std::size_t{pool}}) {
    d.allocation[p].add(1);
    d.allocated_bytes[p].add(bytes);
    d.requested_bytes[p].add(static_cast<std::int64_t>(size));
  }
  try {
    live_.insert_or_assign(ptr, live_block{device, size, stream, next_order_++});
  } catch (...) {
    // no memory for the entry: the block is counted but left out of live_json
  }
  return {d.allocated_bytes[all].current, d.allocated_bytes[all].peak > peak_before};
}

void torch_ledger::freed(int device, std::uintptr_t ptr, std::size_t size) noexcept {
  if (!counted(device))
    return;
  const auto pool = small(size) ? 1u : 2u;
  const auto bytes = static_cast<std::int64_t>(rounded(size));
  std::lock_guard lock(mutex_);
  auto& d = devices_[device];
  for (auto p : {all, std::size_t{pool}}) {
    d.allocation[p].remove(1);
    d.allocated_bytes[p].remove(bytes);
    d.requested_bytes[p].remove(static_cast<std::int64_t>(size));
  }
  live_.erase(ptr);
}

void torch_ledger::out_of_memory(int device) noexcept {
  if (!counted(device))
    return;
  std::lock_guard lock(mutex_);
  ++devices_[device].num_ooms;
}

void torch_ledger::sample_reserved(int device, std::int64_t held, std::int64_t allocations,
                                   std::int64_t releases) noexcept {
  if (!counted(device))
    return;
  std::lock_guard lock(mutex_);
  auto& d = devices_[device];
  auto& r = d.reserved_bytes;
  if (held > r.current)
    r.allocated += held - r.current;
  else
    r.freed += r.current - held;
  r.current = held;
  r.peak = std::max(r.peak, held);
  d.num_device_alloc = allocations - device_alloc_base_[device];
  d.num_device_free = releases - device_free_base_[device];
}

void torch_ledger::reset_peaks(int device) noexcept {
  if (!counted(device))
    return;
  std::lock_guard lock(mutex_);
  each_stat(devices_[device], [](torch_stat& s) { s.peak = s.current; });
}

void torch_ledger::reset_accumulated(int device) noexcept {
  if (!counted(device))
    return;
  std::lock_guard lock(mutex_);
  auto& d = devices_[device];
  each_stat(d, [](torch_stat& s) { s.allocated = s.freed = 0; });
  d.num_ooms = 0;
  device_alloc_base_[device] += d.num_device_alloc;
  device_free_base_[device] += d.num_device_free;
  d.num_device_alloc = d.num_device_free = 0;
}

std::string torch_ledger::json(int device) const {
  boost::json::object out;
  torch_device_ledger d;
  if (counted(device)) {
    std::lock_guard lock(mutex_);
    d = devices_[device];
  }
  put(out, "allocation", d.allocation);
  put(out, "allocated_bytes", d.allocated_bytes);
  put(out, "requested_bytes", d.requested_bytes);
  // uma frees a block at once (a block freed on a stream is reused on that stream, on another
  // once its event completed): nothing is freed but still active, so active is allocated.
  put(out, "active", d.allocation);
  put(out, "active_bytes", d.allocated_bytes);
  // uma's slabs are not split by size class: reserved has no small and large pools.
  put(out, "reserved_bytes.all", d.reserved_bytes);
  out["num_ooms"] = d.num_ooms;
  out["num_alloc_retries"] = 0;
  out["num_device_alloc"] = d.num_device_alloc;
  out["num_device_free"] = d.num_device_free;
  return boost::json::serialize(out);
}

std::string torch_ledger::live_json(int device) const {
  boost::json::array out;
  std::lock_guard lock(mutex_);
  for (const auto& [address, block] : live_)
    if (block.device == device)
      out.push_back(boost::json::object{
          {"address", address}, {"size", block.size}, {"stream", block.stream}});
  return boost::json::serialize(out);
}

std::vector<std::pair<std::uintptr_t, std::size_t>> torch_ledger::live_blocks(int device) const {
  std::map<std::uint64_t, std::pair<std::uintptr_t, std::size_t>> by_order;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [address, block] : live_)
      if (block.device == device)
        by_order.emplace(block.order, std::pair{address, block.size});
  }
  std::vector<std::pair<std::uintptr_t, std::size_t>> out;
  out.reserve(by_order.size());
  for (const auto& [order, b] : by_order)
    out.push_back(b);
  return out;
}

torch_ledger& process_torch_ledger() noexcept {
  static torch_ledger ledger;
  return ledger;
}

}  // namespace uma::c
