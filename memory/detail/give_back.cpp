#include <uma/memory/detail/give_back.hpp>

#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <uma/memory/detail/block_shard.hpp>
#include <uma/memory/detail/slab.hpp>
#include <uma/memory/detail/slab_registry.hpp>

namespace uma::detail {

idle_slabs::idle_slabs(idle_slabs&& other) noexcept
    : slabs_(std::exchange(other.slabs_, {})),
      free_blocks_(std::exchange(other.free_blocks_, {})) {}

idle_slabs& idle_slabs::operator=(idle_slabs&& other) noexcept {
  if (this != &other) {
    give_back();
    slabs_ = std::exchange(other.slabs_, {});
    free_blocks_ = std::exchange(other.free_blocks_, {});
  }
  return *this;
}

idle_slabs::~idle_slabs() {
  give_back();
}

idle_slabs idle_slabs::unlink(slab_registry& registry, block_shard* shards) {
  std::unordered_map<const slab*, std::uint32_t> ready;  // free blocks done with, per slab
  for (std::size_t i = 0; i < block_shards; ++i)
    for (auto& p : shards[i].pools)
      for (auto* head : p.heads)
        for (auto* b = head; b != nullptr; b = b->next)
          if (b->rec.parent->out() == 0 && ready_elsewhere(*b, shards[i].events))
            ++ready[b->rec.parent];
  std::unordered_set<const slab*> idle;  // every block free and done with
  std::size_t blocks = 0;
  for (const auto& [s, n] : ready)
    if (n == s->count()) {
      idle.insert(s);
      blocks += n;
    }
  idle_slabs out;
  out.free_blocks_.reserve(blocks);
  out.slabs_ = registry.remove(idle);  // may throw: nothing changed yet
  for (std::size_t i = 0; i < block_shards; ++i)
    for (auto& p : shards[i].pools)
      for (auto*& head : p.heads)
        for (block** link = &head; *link != nullptr;) {
          if (idle.contains((*link)->rec.parent)) {
            out.free_blocks_.push_back(*link);  // reserved
            shards[i].free -= static_cast<std::int64_t>((*link)->rec.parent->block_bytes());
            *link = (*link)->next;
          } else {
            link = &(*link)->next;
          }
        }
  return out;
}

std::uint64_t idle_slabs::bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto* s : slabs_)
    n += s->bytes();
  return n;
}

std::uint64_t idle_slabs::give_back() noexcept {
  const auto n = bytes();
  for (auto* b : std::exchange(free_blocks_, {}))
    if (auto* e = std::exchange(b->event, nullptr))
      b->rec.parent->events().destroy_event(e);
  for (auto* s : std::exchange(slabs_, {}))
    delete s;  // its region goes back to the actor, which frees it
  return n;
}

void let_go_all(slab_registry& registry, block_shard* shards) noexcept {
  for (std::size_t i = 0; i < block_shards; ++i) {
    auto& sh = shards[i];
    for (auto& p : sh.pools)
      for (auto* head : p.heads)
        for (auto* b = head; b != nullptr; b = b->next)
          if (auto* e = std::exchange(b->event, nullptr))
            b->rec.parent->events().destroy_event(e);
    sh.pools.clear();
    sh.free = 0;
  }
  auto& counts = shards[0];  // the blocks given up leave the sums: any shard's counters do
  for (auto* s : registry.take_all()) {
    s->let_go_done = true;
    s->unpin();  // post_stop has decided what to leak: the pin did its work
    for (std::uint32_t i = 0; i < s->count(); ++i)
      if (auto& b = s->at(i); b.raw && b.out.exchange(false, std::memory_order_acq_rel)) {
        b.raw = false;  // given up: its memory was leaked or freed with its slab
        s->count_out(b.shard, -1);
        counts.in_use -= static_cast<std::int64_t>(s->block_bytes());
        counts.requested -= static_cast<std::int64_t>(b.requested);
        --counts.blocks;
      }
    s->remaining.store(s->out(), std::memory_order_release);
    if (s->remaining.load(std::memory_order_relaxed) == 0)
      delete s;  // else the last block coming back deletes it (put_back)
  }
}

}  // namespace uma::detail
