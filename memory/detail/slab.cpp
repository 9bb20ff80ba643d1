#include <uma/memory/detail/slab.hpp>

#include <string>

namespace uma::detail {

slab::slab(std::shared_ptr<block_allocator> owner, region* home, std::uint64_t first_id,
           std::size_t block_bytes, std::uint32_t count, std::uint32_t size_class)
    : owner_(std::move(owner)),
      home_(home),
      first_id_(first_id),
      block_bytes_(block_bytes),
      count_(count),
      class_(size_class) {
  for (std::uint32_t i = 0; i < count; ++i)
    blocks_.emplace_back(home->control, first_id + i, home->data + std::size_t{i} * block_bytes,
                         block_bytes, home, this);
}

slab::~slab() {
  pin_.reset();
  if (home_ != nullptr)
    drop_ref(home_);
}

slab* slab::carve(std::shared_ptr<block_allocator> owner, memory_resource& stack,
                  const std::shared_ptr<control_block>& control, std::size_t block_bytes,
                  std::size_t count, std::uint32_t size_class) {
  const std::size_t page = stack.properties().page;
  const std::string label =
      "slab: " + std::to_string(count) + " x " + std::to_string(block_bytes) + " bytes";
  const auto memory = stack.allocate({block_bytes * count, page, attach_flag::global, label});
  const auto first = control->reserve_ids(count + 1);
  region* home = nullptr;
  try {
    home = new region(control, first, memory.base, memory.data, memory.bytes, memory.charged);
    adopt_first_ref(home);  // the slab's count; the table takes the initial one
    return new slab(std::move(owner), home, first + 1, block_bytes,
                    static_cast<std::uint32_t>(count), size_class);
  } catch (...) {
    delete home;  // nobody else knows it yet
    stack.deallocate(memory);
    throw;
  }
}

void slab::abandon(slab* s, memory_resource& stack) noexcept {
  auto* home = std::exchange(s->home_, nullptr);
  delete s;
  stack.deallocate({home->base, home->data, home->bytes, home->backend_bytes});
  delete home;
}

void slab::pin_for_raw() {
  if (pin_)
    return;
  add_ref(home_);
  pin_.emplace(adopt_ref(home_, 0, home_->bytes).pin());
}

block* slab::block_at(const void* p) noexcept {
  const auto off = reinterpret_cast<std::uintptr_t>(p) - begin();
  if (off >= bytes() || off % block_bytes_ != 0)
    return nullptr;
  return &blocks_[off / block_bytes_];
}

block* slab::block_holding(const void* p, std::size_t bytes) noexcept {
  const auto off = reinterpret_cast<std::uintptr_t>(p) - begin();
  if (off >= this->bytes() || bytes > block_bytes_ - off % block_bytes_)
    return nullptr;
  return &blocks_[off / block_bytes_];
}

}  // namespace uma::detail
