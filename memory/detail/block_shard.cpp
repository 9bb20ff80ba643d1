#include <uma/memory/detail/block_shard.hpp>

#include <string>
#include <utility>

#include <uma/memory/detail/slab.hpp>
#include <uma/sys/log.hpp>

namespace uma::detail {

shard_locks lock_shards(block_shard* shards) {
  shard_locks locks;
  for (std::size_t i = 0; i < block_shards; ++i)
    locks[i] = std::unique_lock(shards[i].mutex);
  return locks;
}

block_shard::stream_pool& block_shard::pool_of(int device, void* stream, std::uint32_t classes) {
  if (last_pool < pools.size() && pools[last_pool].stream == stream &&
      pools[last_pool].device == device)
    return pools[last_pool];
  for (std::size_t i = 0; i < pools.size(); ++i)
    if (pools[i].stream == stream && pools[i].device == device) {
      last_pool = i;
      return pools[i];
    }
  pools.push_back({device, stream, std::vector<block*>(classes, nullptr)});
  last_pool = pools.size() - 1;
  return pools.back();
}

block* block_shard::pop(std::uint32_t cls, int device, void* stream, std::uint32_t classes) {
  auto& head = pool_of(device, stream, classes).heads[cls];
  if (auto* b = head) {  // its own stream: reusable at once
    head = b->next;
    return b;
  }
  for (auto& p : pools) {  // another stream's: only once that stream is done with it
    if (p.stream == stream && p.device == device)
      continue;
    block** link = &p.heads[cls];
    for (int looked = 0; *link != nullptr && looked < 4; ++looked) {
      auto* b = *link;
      if (ready_elsewhere(*b, events)) {
        *link = b->next;
        cross += b->clean ? 0 : 1;
        return b;
      }
      link = &b->next;
    }
  }
  return nullptr;
}

void block_shard::list(block& b, std::uint32_t cls, std::uint32_t classes) noexcept {
  // pool_of allocates only for a (device, stream) this shard never saw: a block comes back on
  // the stream it was handed out for or freed on, whose pool exists unless it is new here.
  b.next = std::exchange(pool_of(b.device, b.stream, classes).heads[cls], &b);
}

bool ready_elsewhere(block& b, std::uint64_t& events_recorded) noexcept {
  if (b.clean)
    return true;
  if (b.stream_bound)
    return false;
  auto& events = b.rec.parent->events();
  try {
    if (b.event == nullptr)
      b.event = events.create_event();
    if (!b.event_recorded) {  // a lasting stream: an event recorded later than the free covers it
      events.record_event(b.event, stream_view{b.stream});
      b.event_recorded = true;
      ++events_recorded;
    }
    return events.event_done(b.event);
  } catch (const std::exception& e) {
    log(log_level::warning,
        std::string("block_allocator: a block stays on its stream: ") + e.what());
    b.stream_bound = true;
    return false;
  }
}

}  // namespace uma::detail
