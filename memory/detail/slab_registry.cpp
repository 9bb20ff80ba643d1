#include <uma/memory/detail/slab_registry.hpp>

#include <algorithm>
#include <iterator>

#include <uma/memory/detail/slab.hpp>

namespace uma::detail {

void slab_registry::add(slab* s, control_block& control) {
  if (slabs_.size() == slabs_.capacity())  // room first: nothing below may fail once queued
    slabs_.reserve(std::max<std::size_t>(16, 2 * slabs_.size()));
  by_address_.emplace(s->begin(), s);
  try {
    // Queued under the registry's lock, which the seal takes too: post_stop finds every slab
    // that joined before it. The queue carries the slab itself, not a wake-up id: the actor
    // takes slabs and releases in one snapshot, so it adopts a slab before any release of it.
    control.enqueue_slab(s->home(), s->count());
  } catch (...) {
    by_address_.erase(s->begin());
    throw;
  }
  slabs_.push_back(s);  // reserved: cannot throw
  bytes_ += s->bytes();
}

slab* slab_registry::holding(const void* p) const noexcept {
  auto it = by_address_.upper_bound(reinterpret_cast<std::uintptr_t>(p));
  return it == by_address_.begin() ? nullptr : std::prev(it)->second;
}

block* slab_registry::raw_block_at(const void* p) const noexcept {
  auto* s = holding(p);
  auto* b = s != nullptr ? s->block_at(p) : nullptr;
  return b != nullptr && b->raw && b->out.load(std::memory_order_acquire) ? b : nullptr;
}

block* slab_registry::raw_block_holding(const void* p, std::size_t bytes) const noexcept {
  auto* s = holding(p);
  auto* b = s != nullptr ? s->block_holding(p, bytes) : nullptr;
  return b != nullptr && b->raw && b->out.load(std::memory_order_acquire) ? b : nullptr;
}

std::vector<slab*> slab_registry::remove(const std::unordered_set<const slab*>& idle) {
  std::vector<slab*> gone;
  gone.reserve(idle.size());
  std::erase_if(slabs_, [&](slab* s) {
    if (!idle.contains(s))
      return false;
    gone.push_back(s);
    return true;
  });
  for (auto* s : gone) {
    by_address_.erase(s->begin());
    bytes_ -= s->bytes();
    s->let_go_done = true;
  }
  return gone;
}

void slab_registry::unpin_idle() noexcept {
  for (auto* s : slabs_)
    if (s->out() == 0)
      s->unpin();
}

std::vector<slab*> slab_registry::take_all() noexcept {
  by_address_.clear();
  bytes_ = 0;
  return std::exchange(slabs_, {});
}

}  // namespace uma::detail
