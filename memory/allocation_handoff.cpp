#include <uma/memory/allocation_handoff.hpp>

namespace uma {

allocation_handoff::allocation_handoff(std::shared_ptr<memory_resource> owner, const allocation& a)
    : state_(std::make_shared<state>()) {
  state_->owner = std::move(owner);
  state_->memory = a;
}

std::optional<allocation> allocation_handoff::take() noexcept {
  if (!state_ || state_->taken)
    return std::nullopt;
  state_->taken = true;
  return state_->memory;
}

allocation_handoff::state::~state() {
  if (!taken && owner)
    owner->deallocate(memory);
}

}  // namespace uma
