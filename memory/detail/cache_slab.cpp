#include <uma/memory/detail/cache_parts.hpp>

#include <uma/memory/detail/cache_core.hpp>

namespace uma::detail {

cache_slab::cache_slab(cache_core& core, block_cache lease, std::uint32_t size_class, bool raw)
    : core_(core), lease_(std::move(lease)), class_(size_class), raw_(raw) {
  auto* state = cache_access::state(lease_);
  const auto* home = record_of(state->backing());
  control_ = home->control.get();
  events_ = &control_->owning_backend();
  begin_ = reinterpret_cast<std::uintptr_t>(home->data);
  block_bytes_ = state->block_bytes();
  count_ = state->capacity();
  bytes_ = block_bytes_ * count_;
  // What may throw comes first: once blocks are taken, they hold the lease.
  if (raw)
    pin_.emplace(state->backing().pin());  // allocator_stopped when the lease is inert
  blocks_ = std::make_unique<cache_block[]>(count_);
  for (std::uint32_t i = 0; i < count_; ++i) {
    region* r = state->take();  // a fresh lease: every block is there
    auto& b = blocks_[state->index_of(r)];
    b.rec = r;
    b.slab = this;
    if (!raw)
      r->refs.store(0, std::memory_order_relaxed);  // the facade's blocks rest without a user
  }
  state->set_sink(this);
  core_.retain();
}

void cache_slab::returned(region* r) noexcept {
  auto& b = blocks_[r->lease->index_of(r)];
  if (raw_ || core_.closed() || !alive()) {
    // Raw mode's blocks come here only when the cache gives them up (their refs never drop
    // otherwise); a closed cache or a stopped generation keeps nothing.
    if (!raw_ && !core_.closed())
      core_.uncount(&b);  // it was in use: the counters forget it
    core_.give_to_lease(&b);
    return;
  }
  core_.put(&b, b.device, b.stream);
}

void cache_slab::lease_ended() noexcept {
  auto& core = core_;
  if (retired_)
    core.retire(this);
  else
    delete this;
  core.release();
}

std::uint32_t cache_slab::out_count() const noexcept {
  std::uint32_t n = 0;
  for (std::uint32_t i = 0; i < count_; ++i)
    n += blocks_[i].out.load(std::memory_order_acquire) ? 1 : 0;
  return n;
}

void cache_slab::let_go(bool unpin_too) noexcept {
  if (unpin_too)
    pin_.reset();
  lease_.reset();  // may end the lease (and delete this) when no block is out
}

cache_block* cache_slab::block_at(const void* p) noexcept {
  const auto off = reinterpret_cast<std::uintptr_t>(p) - begin_;
  if (off >= bytes_ || off % block_bytes_ != 0)
    return nullptr;
  return &blocks_[off / block_bytes_];
}

cache_block* cache_slab::block_holding(const void* p, std::size_t bytes) noexcept {
  const auto off = reinterpret_cast<std::uintptr_t>(p) - begin_;
  if (off >= bytes_)
    return nullptr;
  const auto i = off / block_bytes_;
  if (bytes > block_bytes_ - off % block_bytes_)
    return nullptr;
  return &blocks_[i];
}

}  // namespace uma::detail
