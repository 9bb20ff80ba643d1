#include <uma/memory/detail/cache_core.hpp>

#include <algorithm>
#include <string>
#include <unordered_map>

#include <uma/memory/detail/size_classes.hpp>
#include <uma/sys/log.hpp>

namespace uma::detail {

namespace {

/// Streams that never go away (the legacy default stream, cudaStreamLegacy,
/// cudaStreamPerThread): an event may be recorded on them long after the free. On any other
/// stream the event is recorded at the free, since the stream may be destroyed after it.
bool lasting(void* stream) noexcept {
  return reinterpret_cast<std::uintptr_t>(stream) <= 2;
}

std::size_t shard_index() noexcept {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t mine =
      next.fetch_add(1, std::memory_order_relaxed) % cache_core::shard_count;
  return mine;
}

stream_cache_config checked(stream_cache_config c) {
  if (c.page == 0 || (c.page & (c.page - 1)) != 0)
    raise(errc::invalid_argument,
          "caching layer: page " + std::to_string(c.page) + " is not a power of two");
  if (c.max_bytes == 0 || c.max_bytes > (std::size_t{1} << 40))
    raise(errc::invalid_argument,
          "caching layer: max_bytes " + std::to_string(c.max_bytes) + " must be 1 byte to 1 TiB");
  c.slab_bytes = std::max(c.slab_bytes, std::size_t{1} << slab_map::granule_shift);
  return c;
}

}  // namespace

cache_core::cache_core(lease_source source, stream_cache_config config)
    : source_(std::move(source)),
      config_(checked(std::move(config))),
      classes_(class_of(config_.max_bytes) + 1) {}

std::uint32_t cache_core::class_of(std::size_t bytes) const noexcept {
  return size_classes::index_of((bytes + config_.page - 1) / config_.page);
}

cache_core::shard& cache_core::my_shard() noexcept {
  return shards_[shard_index()];
}

cache_core::stream_bins& cache_core::bins_of(shard& s, int device, void* stream) {
  if (s.last < s.streams.size() && s.streams[s.last].stream == stream &&
      s.streams[s.last].device == device)
    return s.streams[s.last];
  for (std::size_t i = 0; i < s.streams.size(); ++i)
    if (s.streams[i].stream == stream && s.streams[i].device == device) {
      s.last = i;
      return s.streams[i];
    }
  s.streams.push_back({device, stream, std::vector<cache_block*>(classes_, nullptr)});
  s.last = s.streams.size() - 1;
  return s.streams.back();
}

cache_block* cache_core::pop_same(shard& s, std::uint32_t cls, int device, void* stream) {
  auto& head = bins_of(s, device, stream).heads[cls];
  auto* b = head;
  if (b != nullptr) {
    head = b->next;
    s.free -= static_cast<std::int64_t>(b->slab->block_bytes());
  }
  return b;
}

bool cache_core::ready_elsewhere(shard& s, cache_block* b) noexcept {
  if (b->clean)
    return true;
  if (b->stream_bound)
    return false;
  try {
    auto& events = b->slab->events();
    if (b->event == nullptr)
      b->event = events.create_event();
    if (!b->event_recorded) {
      // Only on a lasting stream (see `lasting`): later than the free, which covers it.
      events.record_event(b->event, stream_view{b->stream});
      b->event_recorded = true;
      ++s.events;
    }
    return events.event_done(b->event);
  } catch (const std::exception& e) {
    log(log_level::warning, std::string("caching layer: a block stays on its stream: ") + e.what());
    b->stream_bound = true;
    return false;
  }
}

cache_block* cache_core::pop_other(shard& s, std::uint32_t cls, int device, void* stream) {
  for (auto& bins : s.streams) {
    if (bins.stream == stream && bins.device == device)
      continue;
    cache_block** link = &bins.heads[cls];
    for (int looked = 0; *link != nullptr && looked < 4; ++looked) {
      auto* b = *link;
      if (ready_elsewhere(s, b)) {
        *link = b->next;
        s.free -= static_cast<std::int64_t>(b->slab->block_bytes());
        if (!b->clean)
          ++s.cross;
        return b;
      }
      link = &b->next;
    }
  }
  return nullptr;
}

void cache_core::hand_out(shard& s, cache_block* b, std::size_t requested, int device,
                          void* stream) {
  s.in_use += static_cast<std::int64_t>(b->slab->block_bytes());
  s.requested += static_cast<std::int64_t>(requested);
  ++s.blocks;
  b->clean = false;
  b->event_recorded = false;
  b->device = device;
  b->stream = stream;
  b->requested = requested;
  b->out.store(true, std::memory_order_release);
}

cache_block* cache_core::steal(shard& mine, std::uint32_t cls, int device, void* stream) {
  for (auto& s : shards_) {
    if (&s == &mine)
      continue;
    std::unique_lock lock(s.mutex, std::try_to_lock);
    if (!lock.owns_lock())
      continue;
    cache_block* b = pop_same(s, cls, device, stream);
    if (b == nullptr)
      b = pop_other(s, cls, device, stream);
    if (b != nullptr)
      return b;
  }
  return nullptr;
}

cache_block* cache_core::take(std::uint32_t cls, std::size_t requested, int device, void* stream) {
  auto& s = my_shard();
  for (;;) {
    cache_block* b = nullptr;
    {
      std::lock_guard lock(s.mutex);
      b = pop_same(s, cls, device, stream);
      if (b == nullptr)
        b = pop_other(s, cls, device, stream);
      if (b != nullptr && b->slab->alive()) {
        hand_out(s, b, requested, device, stream);
        ++s.hits;
        return b;
      }
    }
    if (b == nullptr) {
      b = steal(s, cls, device, stream);
      if (b == nullptr)
        return grow(s, cls, requested, device, stream);
      if (b->slab->alive()) {
        std::lock_guard lock(s.mutex);
        hand_out(s, b, requested, device, stream);
        ++s.hits;
        return b;
      }
    }
    discard(b);  // a block of a stopped generation is never handed out
  }
}

cache_block* cache_core::grow(shard& s, std::uint32_t cls, std::size_t requested, int device,
                              void* stream) {
  std::lock_guard grow_lock(grow_mutex_);
  prune_dead();
  const std::size_t block = size_classes::pages_of(cls) * config_.page;
  const std::size_t blocks = std::max<std::size_t>(1, (config_.slab_bytes + block - 1) / block);
  slabs_.reserve(slabs_.size() + 1);
  auto lease = source_(block, blocks, config_.label);
  auto* slab = new cache_slab(*this, std::move(lease), cls, config_.mode == cache_mode::raw);
  slabs_.push_back(slab);
  if (config_.mode == cache_mode::raw) {
    try {
      map_slab(slab);
    } catch (...) {
      slabs_.pop_back();
      for (std::uint32_t i = 0; i < slab->count(); ++i)
        discard(&slab->block(i));
      slab->let_go(true);
      throw;
    }
  }
  std::lock_guard lock(s.mutex);
  ++s.misses;
  auto& head = bins_of(s, device, stream).heads[cls];
  for (std::uint32_t i = slab->count(); i-- > 1;) {
    auto* b = &slab->block(i);
    b->device = device;
    b->stream = stream;
    b->next = head;
    head = b;
    s.free += static_cast<std::int64_t>(slab->block_bytes());
  }
  hand_out(s, &slab->block(0), requested, device, stream);
  return &slab->block(0);
}

void cache_core::prune_dead() noexcept {
  if (config_.mode == cache_mode::raw)
    return;  // raw slabs stay mapped until close: their pointers may still come back
  auto dead = std::stable_partition(slabs_.begin(), slabs_.end(),
                                    [](const cache_slab* s) { return s->alive(); });
  for (auto it = dead; it != slabs_.end(); ++it)
    (*it)->let_go(true);
  slabs_.erase(dead, slabs_.end());
}

void cache_core::put(cache_block* b, int device, void* stream) noexcept {
  b->device = device;
  b->stream = stream;
  b->event_recorded = false;
  bool recorded = false;
  if (!lasting(stream) && !b->stream_bound) {
    try {
      auto& events = b->slab->events();
      if (b->event == nullptr)
        b->event = events.create_event();
      events.record_event(b->event, stream_view{stream});
      b->event_recorded = recorded = true;
    } catch (const std::exception& e) {
      log(log_level::warning,
          std::string("caching layer: a block stays on its stream: ") + e.what());
      b->stream_bound = true;
    }
  }
  auto& s = my_shard();
  std::unique_lock lock(s.mutex);
  const auto bytes = static_cast<std::int64_t>(b->slab->block_bytes());
  s.in_use -= bytes;
  s.requested -= static_cast<std::int64_t>(b->requested);
  --s.blocks;
  s.events += recorded ? 1 : 0;
  if (closed()) {
    lock.unlock();
    discard(b);
    return;
  }
  try {
    auto& head = bins_of(s, device, stream).heads[b->slab->size_class()];
    b->next = head;
    head = b;
    s.free += bytes;
  } catch (...) {  // no host memory for a new stream's bins: the block leaves the cache
    lock.unlock();
    discard(b);
  }
}

void cache_core::uncount(const cache_block* b) noexcept {
  auto& s = my_shard();
  std::lock_guard lock(s.mutex);
  s.in_use -= static_cast<std::int64_t>(b->slab->block_bytes());
  s.requested -= static_cast<std::int64_t>(b->requested);
  --s.blocks;
}

void cache_core::give_to_lease(cache_block* b) noexcept {
  if (b->event != nullptr)
    b->slab->events().destroy_event(std::exchange(b->event, nullptr));
  b->rec->lease->return_block(b->rec);
}

void cache_core::discard(cache_block* b) noexcept {
  if (b->slab->raw())
    drop_ref(b->rec);  // comes back through cache_slab::returned
  else
    give_to_lease(b);
}

cache_core::~cache_core() {
  for (auto* s : retired_)
    delete s;
}

void cache_core::retire(cache_slab* s) noexcept {
  std::lock_guard lock(retired_mutex_);
  retired_.push_back(s);  // room reserved by trim
}

std::uint64_t cache_core::trim() {
  std::lock_guard grow_lock(grow_mutex_);
  prune_dead();
  // Every shard locked: no block moves between a free list and a caller while slabs are counted.
  std::vector<std::unique_lock<std::mutex>> locks;
  locks.reserve(shard_count);
  for (auto& s : shards_)
    locks.emplace_back(s.mutex);
  std::unordered_map<const cache_slab*, std::uint32_t> idle;
  for (auto& s : shards_)
    for (auto& bins : s.streams)
      for (auto* head : bins.heads)
        for (auto* b = head; b != nullptr; b = b->next)
          if (ready_elsewhere(s, b))
            ++idle[b->slab];
  std::erase_if(idle, [](const auto& kv) { return kv.second != kv.first->count(); });
  if (idle.empty())
    return 0;
  {
    std::lock_guard lock(retired_mutex_);
    retired_.reserve(retired_.size() + idle.size());
  }
  std::vector<cache_block*> gone;
  for (auto& s : shards_)
    for (auto& bins : s.streams)
      for (auto*& head : bins.heads)
        for (cache_block** link = &head; *link != nullptr;) {
          auto* b = *link;
          if (idle.contains(b->slab)) {
            *link = b->next;
            s.free -= static_cast<std::int64_t>(b->slab->block_bytes());
            gone.push_back(b);
          } else {
            link = &b->next;
          }
        }
  locks.clear();
  std::uint64_t bytes = 0;
  std::vector<cache_slab*> trimmed;
  trimmed.reserve(idle.size());
  std::erase_if(slabs_, [&](cache_slab* slab) {
    if (!idle.contains(slab))
      return false;
    bytes += slab->bytes();
    if (slab->raw()) {
      map_.erase(slab->begin(), slab->bytes(), slab);
      slab->mark_retired();
    }
    trimmed.push_back(slab);
    return true;
  });
  for (auto* b : gone)
    discard(b);
  for (auto* slab : trimmed)
    slab->let_go(true);  // every block is back: the lease ends, its memory goes to the allocator
  return bytes;
}

}  // namespace uma::detail
