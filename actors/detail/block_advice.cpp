#include <uma/actors/detail/block_advice.hpp>

#include <uma/memory/advice_ops.hpp>
#include <uma/memory/detail/slab.hpp>

namespace uma::detail {

advice_state& block_advice::track(region* rec) {
  auto& tracked = blocks_.try_emplace(rec->id, advised_block{rec, {}}).first->second;
  rec->needs_reset.store(true, std::memory_order_release);
  return tracked.state;
}

advice_state* block_advice::find(std::uint64_t id) {
  auto it = blocks_.find(id);
  return it == blocks_.end() ? nullptr : &it->second.state;
}

const advice_state* block_advice::find(std::uint64_t id) const {
  auto it = blocks_.find(id);
  return it == blocks_.end() ? nullptr : &it->second.state;
}

bool block_advice::release(std::uint64_t id) {
  auto it = blocks_.find(id);
  if (it == blocks_.end())
    return false;
  // Not a structured binding: clang 14 (the fuzz build) cannot capture one.
  region* block = it->second.block;
  advice_state state = std::move(it->second.state);
  blocks_.erase(it);
  if (state.is_default()) {
    block->needs_reset.store(false, std::memory_order_relaxed);
    return_block(block);
    return true;
  }
  lanes_.post(worker_lanes::general,
              [b = backend_, block, state, devices = backend_->device_count()] {
                reset_advice(*b, {block->data, block->backend_bytes}, state, devices);
                block->needs_reset.store(false, std::memory_order_relaxed);
                return_block(block);
              });
  return true;
}

void block_advice::give_back(std::span<const std::uint64_t> ids) noexcept {
  for (const auto id : ids)
    if (auto it = blocks_.find(id); it != blocks_.end())
      return_block(it->second.block);
  blocks_.clear();
}

}  // namespace uma::detail
