#include <uma/memory/block_cache.hpp>

#include <string>

namespace uma {

namespace detail {

lease_state::lease_state(byte_ref backing, std::uint64_t first_id, std::size_t block_bytes,
                         std::uint32_t blocks)
    : backing_(std::move(backing)),
      first_id_(first_id),
      block_bytes_(block_bytes),
      capacity_(blocks),
      next_(blocks),
      head_(blocks == 0 ? none : 0),
      available_(blocks) {
  auto* home = detail::record_of(backing_);
  for (std::uint32_t i = 0; i < blocks; ++i) {
    auto* data = home->data + std::size_t{i} * block_bytes;
    blocks_.emplace_back(home->control, first_id + i, data, data, block_bytes, block_bytes,
                         home->slab, home->slab_offset + std::size_t{i} * block_bytes, home, this);
    next_[i].store(i + 1 < blocks ? i + 1 : none, std::memory_order_relaxed);
  }
  live_.fetch_add(1, std::memory_order_relaxed);  // last: a throwing constructor counts nothing
}

region* lease_state::take() noexcept {
  auto h = head_.load(std::memory_order_acquire);
  for (;;) {
    const auto index = static_cast<std::uint32_t>(h);
    if (index == none)
      return nullptr;
    // Possibly stale when another thread took and returned `index` meanwhile: then the tag
    // changed and the exchange fails.
    const auto next = next_[index].load(std::memory_order_relaxed);
    const std::uint64_t taken = (((h >> 32) + 1) << 32) | next;
    if (head_.compare_exchange_weak(h, taken, std::memory_order_acquire,
                                    std::memory_order_acquire)) {
      available_.fetch_sub(1, std::memory_order_relaxed);
      retain();  // the block holds the lease until it comes back
      auto* r = &blocks_[index];
      r->refs.fetch_add(1, std::memory_order_relaxed);
      return r;
    }
  }
}

void lease_state::push(std::uint32_t index) noexcept {
  available_.fetch_add(1, std::memory_order_relaxed);
  auto h = head_.load(std::memory_order_relaxed);
  std::uint64_t pushed = 0;
  do {
    next_[index].store(static_cast<std::uint32_t>(h), std::memory_order_relaxed);
    pushed = (((h >> 32) + 1) << 32) | index;
  } while (!head_.compare_exchange_weak(h, pushed, std::memory_order_release,
                                        std::memory_order_relaxed));
}

void lease_state::give_back(region* r) noexcept {
  if (sink_ != nullptr)
    sink_->returned(r);
  else
    return_block(r);
}

void lease_state::return_block(region* r) noexcept {
  push(index_of(r));
  release();
}

void lease_state::release() noexcept {
  if (holders_.fetch_sub(1, std::memory_order_acq_rel) == 1)
    delete this;  // drops the backing ref: the allocator frees the lease's memory
}

void lease_block_dropped(region* r) noexcept {
  // Advice the allocator applied must not leak to the block's next user: the actor resets it
  // and gives the block back. Once the allocator is stopping nothing is queued and the block
  // goes straight back (its memory is freed with the lease).
  if (r->needs_reset.load(std::memory_order_acquire) && r->control->enqueue_release(r->id))
    return;
  r->lease->give_back(r);
}

}  // namespace detail

std::optional<byte_ref> block_cache::try_allocate(std::size_t bytes) {
  if (state_ == nullptr)
    raise(errc::invalid_argument, "block_cache: the cache is empty (no lease)");
  if (bytes == 0 || bytes > state_->block_bytes())
    raise(errc::invalid_argument, "block_cache: " + std::to_string(bytes) +
                                      " bytes requested; a block of lease " +
                                      std::to_string(lease_id()) + " holds 1 to " +
                                      std::to_string(state_->block_bytes()) + " bytes");
  if (!state_->control().alive())
    return std::nullopt;
  auto* r = state_->take();
  if (r == nullptr)
    return std::nullopt;
  return detail::adopt_ref(r, 0, bytes);
}

}  // namespace uma
