// uma_torch_pool_functions (actors/c/uma.h): PyTorch's pluggable-allocator functions carry no
// context, so each pool gets a pair of its own, one of a fixed set of slots, each slot's pair
// forwarding to the allocator bound to it.

#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <utility>

#include <uma/actors/c/c_allocator.hpp>
#include <uma/actors/c/c_guard.hpp>

namespace {

std::array<std::atomic<uma_allocator*>, UMA_TORCH_POOL_SLOTS> slots{};
std::mutex binding;

// A segment PyTorch's caching allocator asked for; NULL tells it "out of memory" (it then
// frees its cached blocks, retries and raises torch.OutOfMemoryError).
template <std::size_t Slot>
void* slot_malloc(std::ptrdiff_t size, int device, uma_stream stream) {
  void* p = nullptr;
  auto* a = slots[Slot].load(std::memory_order_acquire);
  if (a == nullptr || size < 0 ||
      uma_malloc(a, static_cast<std::size_t>(size), device, stream, &p) != UMA_OK)
    return nullptr;
  return p;
}

template <std::size_t Slot>
void slot_free(void* ptr, std::ptrdiff_t size, int device, uma_stream stream) {
  if (auto* a = slots[Slot].load(std::memory_order_acquire); a != nullptr && size >= 0)
    (void)uma_free(a, ptr, static_cast<std::size_t>(size), device, stream);
}

using malloc_fn = void* (*)(std::ptrdiff_t, int, uma_stream);
using free_fn = void (*)(void*, std::ptrdiff_t, int, uma_stream);

template <std::size_t... Slot>
constexpr auto table(std::index_sequence<Slot...>) {
  return std::array<std::pair<malloc_fn, free_fn>, sizeof...(Slot)>{
      std::pair<malloc_fn, free_fn>{&slot_malloc<Slot>, &slot_free<Slot>}...};
}

constexpr auto functions = table(std::make_index_sequence<UMA_TORCH_POOL_SLOTS>{});

}  // namespace

extern "C" uma_status uma_torch_pool_functions(uma_allocator* allocator, void** malloc_out,
                                               void** free_out) {
  return uma::c::guarded([&] {
    uma::c::require(allocator, "uma_torch_pool_functions: allocator");
    uma::c::require(malloc_out, "uma_torch_pool_functions: malloc_fn");
    uma::c::require(free_out, "uma_torch_pool_functions: free_fn");
    std::lock_guard lock(binding);
    for (std::size_t s = 0; s < slots.size(); ++s) {
      if (slots[s].load() != nullptr)
        continue;
      slots[s].store(allocator, std::memory_order_release);
      *malloc_out = reinterpret_cast<void*>(functions[s].first);
      *free_out = reinterpret_cast<void*>(functions[s].second);
      return UMA_OK;
    }
    throw uma::c::status_error(UMA_ERR_OUT_OF_MEMORY,
                               "uma_torch_pool_functions: all " +
                                   std::to_string(UMA_TORCH_POOL_SLOTS) +
                                   " pool slots are bound (one per uma_torch.pool for the "
                                   "process's life)");
  });
}
