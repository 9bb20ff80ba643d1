#include <uma/actors/c/c_torch_spill.hpp>

#include <exception>
#include <string>
#include <unordered_set>
#include <utility>

#include <uma/actors/c/c_allocator.hpp>
#include <uma/actors/c/c_torch_ledger.hpp>
#include <uma/sys/log.hpp>

namespace uma::c {

namespace {

/// The refs of the (key, block) pairs' blocks that `a` still holds; the others (given back since
/// they were tracked: the take-over may have read the ledger just before a free) are left out and
/// their addresses put in `gone`.
template <class Keyed>
std::vector<byte_ref> refs_of(uma_allocator& a, const std::vector<Keyed>& blocks,
                              std::vector<std::uintptr_t>& gone) {
  std::vector<byte_ref> refs;
  refs.reserve(blocks.size());
  for (const auto& [key, b] : blocks) {
    try {
      refs.push_back(a.ref_of(reinterpret_cast<const void*>(b.address), b.size));
    } catch (const status_error&) {
      gone.push_back(b.address);
    }
  }
  return refs;
}

/// Preferred location host, accessed by `device`; and, when `prefetch`, prefetched to the host
/// (on the legacy default stream, returning once enqueued).
void to_host(uma_allocator& a, std::vector<byte_ref> refs, int device, bool prefetch) {
  if (refs.empty())
    return;
  (void)a.client->advise(refs, advice::set_preferred_location, location::host());
  (void)a.client->advise(refs, advice::set_accessed_by, location::device(device));
  if (prefetch)
    (void)a.client->prefetch(std::move(refs), {location::host()}, a.stream_of(nullptr));
}

/// The advice of to_host undone, and the blocks prefetched back to `device`.
void to_device(uma_allocator& a, std::vector<byte_ref> refs, int device) {
  if (refs.empty())
    return;
  (void)a.client->advise(refs, advice::unset_preferred_location, location::device(device));
  (void)a.client->advise(refs, advice::unset_accessed_by, location::device(device));
  (void)a.client->prefetch(std::move(refs), {location::device(device)}, a.stream_of(nullptr));
}

void warn(const char* what, int device, const std::exception& e) noexcept {
  log(log_level::warning, std::string("uma_torch spill: ") + what + " on device " +
                              std::to_string(device) +
                              " failed (the blocks stay where they are): " + e.what());
}

}  // namespace

template <class F>
auto torch_spill::locked(device_state& d, F&& f) {
  std::lock_guard lock(d.mutex);
  struct publish {
    device_state& d;
    ~publish() {
      d.limit.store(d.guarded.limit, std::memory_order_relaxed);
      d.placed_bytes.store(d.guarded.placed_bytes, std::memory_order_relaxed);
    }
  } on_exit{d};
  return f(d.guarded);
}

std::uint64_t torch_spill::limit(int device) const noexcept {
  return device >= 0 && device < max_devices
             ? devices_[device].limit.load(std::memory_order_relaxed)
             : no_limit;
}

std::uint64_t torch_spill::placed_bytes(int device) const noexcept {
  return device >= 0 && device < max_devices
             ? devices_[device].placed_bytes.load(std::memory_order_relaxed)
             : 0;
}

std::uint64_t torch_spill::spilled_bytes() const noexcept {
  return spilled_bytes_.load(std::memory_order_relaxed);
}

void torch_spill::insert(blocks& b, block blk, bool spilled) const {
  if (const auto old = b.order.find(blk.address); old != b.order.end()) {
    // A stale entry of a block given back while the take-over read the ledger.
    if (const auto p = b.placed.find(old->second); p != b.placed.end()) {
      b.placed_bytes -= p->second.size;
      b.placed.erase(p);
    }
    b.spilled.erase(old->second);
    b.order.erase(old);
  }
  const auto key = b.next++;
  (spilled ? b.spilled : b.placed).emplace(key, blk);
  b.order.emplace(blk.address, key);
  if (!spilled)
    b.placed_bytes += blk.size;
}

void torch_spill::take_over(blocks& b, int device) const {
  for (const auto& [address, size] : process_torch_ledger().live_blocks(device))
    insert(b, {address, size}, false);
}

bool torch_spill::place(uma_allocator* a, void* ptr, std::size_t size, int device) noexcept {
  if (device < 0 || device >= max_devices || ptr == nullptr || size == 0)
    return false;
  auto& d = devices_[device];
  if (!d.tracking.load(std::memory_order_acquire))
    return false;  // never limited: nothing to track, no lock on the hooks' path
  try {
    return locked(d, [&](blocks& b) {
      const block blk{reinterpret_cast<std::uintptr_t>(ptr), size};
      bool spill = b.limit != no_limit && (b.placed_bytes + size > b.limit);
      if (spill) {
        try {
          to_host(*a, {a->ref_of(ptr, size)}, device, false);  // new: nothing to move yet
        } catch (const std::exception& e) {
          warn("placing a new block on the host", device, e);
          spill = false;  // it still works where the driver puts it
        }
      }
      insert(b, blk, spill);
      if (spill)
        spilled_bytes_.fetch_add(size, std::memory_order_relaxed);
      return spill;
    });
  } catch (...) {
    return false;  // no memory for the entry: the block works, untracked
  }
}

void torch_spill::forget(int device, const void* ptr) noexcept {
  if (device < 0 || device >= max_devices || ptr == nullptr)
    return;
  auto& d = devices_[device];
  if (!d.tracking.load(std::memory_order_acquire))
    return;
  locked(d, [&](blocks& b) {
    const auto it = b.order.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == b.order.end())
      return;
    if (const auto p = b.placed.find(it->second); p != b.placed.end()) {
      b.placed_bytes -= p->second.size;
      b.placed.erase(p);
    }
    b.spilled.erase(it->second);
    b.order.erase(it);
  });
}

std::size_t torch_spill::move(uma_allocator* a, int device, blocks& b,
                              const std::vector<std::pair<std::uint64_t, block>>& chosen,
                              bool spill) {
  std::vector<std::uintptr_t> gone_list;
  try {
    auto refs = refs_of(*a, chosen, gone_list);
    if (spill)
      to_host(*a, std::move(refs), device, true);
    else
      to_device(*a, std::move(refs), device);
  } catch (const std::exception& e) {
    warn(spill ? "spilling" : "bringing blocks back", device, e);
    return 0;
  }
  const std::unordered_set<std::uintptr_t> gone(gone_list.begin(), gone_list.end());
  auto& from = spill ? b.placed : b.spilled;
  auto& to = spill ? b.spilled : b.placed;
  std::size_t moved = 0;
  for (const auto& [key, blk] : chosen) {
    from.erase(key);
    if (spill)
      b.placed_bytes -= blk.size;
    if (gone.count(blk.address) != 0) {
      b.order.erase(blk.address);
      continue;
    }
    to.emplace(key, blk);
    if (spill)
      spilled_bytes_.fetch_add(blk.size, std::memory_order_relaxed);
    else
      b.placed_bytes += blk.size;
    ++moved;
  }
  return moved;
}

std::size_t torch_spill::spill_newest(uma_allocator* a, int device, blocks& b) {
  std::vector<std::pair<std::uint64_t, block>> chosen;
  std::uint64_t placed = b.placed_bytes;
  for (auto it = b.placed.rbegin(); it != b.placed.rend() && placed > b.limit; ++it) {
    chosen.emplace_back(it->first, it->second);
    placed -= it->second.size;
  }
  return move(a, device, b, chosen, true);
}

void torch_spill::bring_back_oldest(uma_allocator* a, int device, blocks& b) {
  std::vector<std::pair<std::uint64_t, block>> chosen;
  std::uint64_t placed = b.placed_bytes;
  for (const auto& [key, blk] : b.spilled) {
    if (b.limit != no_limit && placed + blk.size > b.limit)
      break;
    chosen.emplace_back(key, blk);
    placed += blk.size;
  }
  (void)move(a, device, b, chosen, false);
}

std::uint64_t torch_spill::shrink_to(uma_allocator* a, int device, std::uint64_t limit) noexcept {
  if (a == nullptr || device < 0 || device >= max_devices)
    return 0;
  auto& d = devices_[device];
  if (limit == no_limit && !d.tracking.load(std::memory_order_acquire))
    return 0;  // never limited and still not: nothing was spilled
  std::size_t spilled = 0;
  try {
    spilled = locked(d, [&](blocks& b) {
      if (!d.tracking.load(std::memory_order_relaxed)) {
        // Set before the ledger is read: a block the ledger gets after the read is one whose
        // hook then sees the flag (the ledger's lock orders the two) and tracks it itself.
        d.tracking.store(true, std::memory_order_seq_cst);
        take_over(b, device);
      }
      b.limit = limit;
      if (b.placed_bytes > limit)
        return spill_newest(a, device, b);
      bring_back_oldest(a, device, b);
      return std::size_t{0};
    });
    // The moves run on the legacy default stream; the bytes are off the device once it ran
    // them. Waited for outside the lock, so that PyTorch's hooks are not held meanwhile.
    if (spilled != 0)
      a->backend->wait_stream(a->stream_of(nullptr));
  } catch (const std::exception& e) {
    warn("moving to a limit", device, e);
  }
  return placed_bytes(device);
}

torch_spill& process_torch_spill() noexcept {
  static torch_spill spill;
  return spill;
}

}  // namespace uma::c
