#include <uma/memory/stream_cache.hpp>

#include <string>

#include <uma/memory/detail/cache_core.hpp>

namespace uma {

namespace detail {

cache_block* cache_core::raw_block(const void* p) const noexcept {
  auto* slab = map_.find(p);
  if (slab == nullptr)
    return nullptr;
  auto* b = slab->block_at(p);
  return b != nullptr && b->out.load(std::memory_order_acquire) ? b : nullptr;
}

cache_block* cache_core::raw_block_holding(const void* p, std::size_t bytes) const noexcept {
  auto* slab = map_.find(p);
  if (slab == nullptr)
    return nullptr;
  auto* b = slab->block_holding(p, bytes);
  return b != nullptr && b->out.load(std::memory_order_acquire) ? b : nullptr;
}

void cache_core::prepare_stop() noexcept {
  std::lock_guard lock(grow_mutex_);
  for (auto* slab : slabs_)
    if (slab->out_count() == 0)
      slab->unpin();
}

void cache_core::close() noexcept {
  closed_.store(true, std::memory_order_seq_cst);
  for (auto& s : shards_) {
    std::vector<cache_block*> blocks;
    {
      std::lock_guard lock(s.mutex);
      for (auto& bins : s.streams)
        for (auto*& head : bins.heads)
          for (auto* b = std::exchange(head, nullptr); b != nullptr; b = b->next)
            blocks.push_back(b);
      s.free = 0;
    }
    for (auto* b : blocks)
      discard(b);
  }
  {
    std::lock_guard lock(grow_mutex_);
    close_slabs();
  }
  // Last: the release may delete this core (and its mutex), so never under the lock.
  release();
}

void cache_core::close_slabs() noexcept {
  for (auto* slab : slabs_) {
    bool keep_pin = false;
    if (slab->raw()) {
      map_.erase(slab->begin(), slab->bytes(), slab);
      // What a caller may still use is given up only once its allocator stopped (post_stop
      // leaked it then); while the allocator lives, its lease stays pinned and held.
      const bool stopped = !slab->alive();
      for (std::uint32_t i = 0; i < slab->count(); ++i) {
        auto& b = slab->block(i);
        if (b.out.load(std::memory_order_acquire)) {
          if (stopped)
            discard(&b);
          else
            keep_pin = true;
        }
      }
    }
    slab->let_go(!keep_pin);
  }
  slabs_.clear();
}

stream_cache_stats cache_core::stats() const {
  stream_cache_stats out;
  std::int64_t in_use = 0, requested = 0, free = 0, blocks = 0;
  for (const auto& s : shards_) {
    std::lock_guard lock(s.mutex);
    in_use += s.in_use;
    requested += s.requested;
    free += s.free;
    blocks += s.blocks;
    out.hits += s.hits;
    out.misses += s.misses;
    out.cross_stream_reuses += s.cross;
    out.events_recorded += s.events;
  }
  out.in_use_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(in_use, 0));
  out.requested_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(requested, 0));
  out.free_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(free, 0));
  out.blocks_in_use = static_cast<std::uint64_t>(std::max<std::int64_t>(blocks, 0));
  std::lock_guard lock(grow_mutex_);
  for (const auto* slab : slabs_)
    if (slab->alive()) {
      ++out.leases;
      out.leased_bytes += slab->bytes();
    }
  return out;
}

}  // namespace detail

stream_cache::stream_cache(lease_source source, stream_cache_config config)
    : core_(new detail::cache_core(std::move(source), std::move(config))) {}

stream_cache::~stream_cache() {
  core_->close();
}

bool stream_cache::serves(std::size_t bytes) const noexcept {
  return bytes != 0 && bytes <= core_->config().max_bytes;
}

namespace {

[[noreturn]] void refuse(const char* what, std::size_t bytes, std::size_t max) {
  raise(errc::invalid_argument, std::string(what) + ": " + std::to_string(bytes) +
                                    " bytes; the caching layer serves 1 to " + std::to_string(max) +
                                    " bytes");
}

}  // namespace

detail::region* stream_cache::take_ref(std::size_t bytes, int device, stream_view stream) {
  if (!serves(bytes) || core_->config().mode != cache_mode::refs)
    refuse("stream_cache::allocate (refs mode)", bytes, core_->config().max_bytes);
  auto* b = core_->take(core_->class_of(bytes), bytes, device, stream.handle);
  b->rec->refs.fetch_add(1, std::memory_order_relaxed);
  return b->rec;
}

byte_ref stream_cache::allocate(std::size_t bytes, int device, stream_view stream) {
  return detail::adopt_ref(take_ref(bytes, device, stream), 0, bytes);
}

std::size_t stream_cache::max_bytes() const noexcept {
  return core_->config().max_bytes;
}

void* stream_cache::allocate_raw(std::size_t bytes, int device, stream_view stream) {
  if (!serves(bytes) || core_->config().mode != cache_mode::raw)
    refuse("stream_cache::allocate_raw (raw mode)", bytes, core_->config().max_bytes);
  return core_->take(core_->class_of(bytes), bytes, device, stream.handle)->rec->data;
}

raw_release stream_cache::release_raw(void* ptr, std::size_t bytes, int device,
                                      stream_view stream) noexcept {
  auto* b = core_->raw_block(ptr);
  if (b == nullptr)
    return raw_release::unknown_pointer;
  if (bytes != 0 && bytes != b->requested)
    return raw_release::size_mismatch;
  if (device != b->device)  // its free list is its device's: another would hand it out there
    return raw_release::device_mismatch;
  if (!b->out.exchange(false, std::memory_order_acq_rel))
    return raw_release::unknown_pointer;  // freed twice, the second time racing the first
  if (b->rec->needs_reset.load(std::memory_order_acquire)) {
    // The allocator advised this block: its advice must not reach the next user. The block
    // leaves the cache through its last drop, which the allocator turns into an advice reset
    // (on a lane, after the work queued before it) before the block goes back to its lease.
    core_->uncount(b);
    core_->discard(b);
    return raw_release::ok;
  }
  core_->put(b, device, stream.handle);
  return raw_release::ok;
}

byte_ref stream_cache::ref_of(const void* ptr, std::size_t bytes) const noexcept {
  auto* b = core_->raw_block_holding(ptr, bytes);
  if (b == nullptr)
    return {};
  detail::add_ref(b->rec);
  const auto offset = static_cast<std::size_t>(static_cast<const std::byte*>(ptr) - b->rec->data);
  return detail::adopt_ref(b->rec, offset, bytes);
}

void stream_cache::prepare_stop() noexcept {
  core_->prepare_stop();
}

std::uint64_t stream_cache::trim() {
  return core_->trim();
}

stream_cache_stats stream_cache::stats() const {
  return core_->stats();
}

}  // namespace uma
