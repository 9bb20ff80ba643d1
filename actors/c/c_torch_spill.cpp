#include <uma/actors/c/c_torch_spill.hpp>

namespace uma::c {

void torch_spill::set_limit(int device, std::uint64_t bytes) noexcept {
  if (device >= 0 && device < max_devices)
    limits_[device].store(bytes, std::memory_order_relaxed);
}

std::uint64_t torch_spill::limit(int device) const noexcept {
  return device >= 0 && device < max_devices ? limits_[device].load(std::memory_order_relaxed) : 0;
}

bool torch_spill::place(uma_allocator* a, void* ptr, std::size_t size, int device,
                        std::int64_t held) noexcept {
  const auto cap = limit(device);
  if (cap == 0 || ptr == nullptr || size == 0 || held <= static_cast<std::int64_t>(cap))
    return false;
  if (uma_advise(a, ptr, size, UMA_ADVICE_SET_PREFERRED_LOCATION, UMA_DEVICE_HOST) != UMA_OK ||
      uma_advise(a, ptr, size, UMA_ADVICE_SET_ACCESSED_BY, device) != UMA_OK)
    return false;  // the block stays where the driver puts it (it still works)
  spilled_bytes_.fetch_add(size, std::memory_order_relaxed);
  return true;
}

std::uint64_t torch_spill::spilled_bytes() const noexcept {
  return spilled_bytes_.load(std::memory_order_relaxed);
}

torch_spill& process_torch_spill() noexcept {
  static torch_spill spill;
  return spill;
}

}  // namespace uma::c
