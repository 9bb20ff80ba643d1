// PyTorch's hooks into the default allocator (the global install: uma_torch_malloc and the
// rest of actors/c/uma.h's PyTorch section), counted in PyTorch's terms by the process's
// torch_ledger. The pools' functions are in c_torch_pools.cpp.

#include <atomic>
#include <stdexcept>
#include <string>

#include <uma/actors/c/c_allocator.hpp>
#include <uma/actors/c/c_guard.hpp>
#include <uma/actors/c/c_torch_ledger.hpp>
#include <uma/actors/c/c_torch_spill.hpp>

namespace {

using uma::c::fail;
using uma::c::guarded;
using uma::c::status_error;

std::atomic<uma_torch_observer> observer{nullptr};

void observe(int action, const void* ptr, std::size_t size, int device,
             uma_stream stream) noexcept {
  if (auto* o = observer.load(std::memory_order_acquire))
    o(action, reinterpret_cast<std::uintptr_t>(ptr), size, device, stream);
}

/// The allocator's held bytes and allocation counts into the ledger's reserved figures.
void sample(uma_allocator& a, int device) noexcept {
  uma_stats s{};
  s.struct_size = sizeof s;
  try {
    s = a.stats();
  } catch (...) {
    return;  // a stopped allocator: the figures stay as last read
  }
  uma::c::process_torch_ledger().sample_reserved(device, static_cast<std::int64_t>(s.live_bytes),
                                                 static_cast<std::int64_t>(s.allocations),
                                                 static_cast<std::int64_t>(s.releases));
}

constexpr const char* capture_refusal =
    "uma_torch_malloc: the stream is capturing a CUDA graph, and a graph replays into the "
    "addresses it captured, which uma's global install does not keep for it; put the model's "
    "state in a uma_torch.pool() and leave PyTorch's own allocator installed, under which "
    "torch.cuda.graph and torch.compile(mode=\"reduce-overhead\") work (docs/frameworks.md "
    "\"CUDA graphs\")";

/// Allocates through the default allocator; throws std::runtime_error naming the reason.
void* allocate(std::ptrdiff_t size, int device, uma_stream stream) {
  if (size < 0)
    throw std::runtime_error("uma_torch_malloc: a negative size");
  auto* a = uma::c::framework_allocator();
  if (a == nullptr)
    throw std::runtime_error(
        "uma_torch_malloc: out of memory or refused: uma's default allocator could not be made: " +
        std::string(uma_last_error()));
  if (a->backend->is_capturing(a->stream_of(stream)))
    throw std::runtime_error(capture_refusal);
  void* p = nullptr;
  auto& ledger = uma::c::process_torch_ledger();
  if (uma_malloc(a, static_cast<std::size_t>(size), device, stream, &p) != UMA_OK) {
    ledger.out_of_memory(device);
    throw std::runtime_error("uma_torch_malloc: out of memory or refused: " +
                             std::string(uma_last_error()));
  }
  const auto after =
      ledger.allocated(device, reinterpret_cast<std::uintptr_t>(p), static_cast<std::size_t>(size),
                       reinterpret_cast<std::uintptr_t>(stream));
  (void)uma::c::process_torch_spill().place(a, p, static_cast<std::size_t>(size), device);
  if (after.new_peak)
    sample(*a, device);
  return p;
}

}  // namespace

extern "C" {

// PyTorch passes what its pluggable allocator's malloc returns into the tensor without a null
// check (torch/csrc/cuda/CUDAPluggableAllocator.cpp), so a NULL would become a tensor with no
// memory. A failure therefore throws: PyTorch calls this hook from C++ and turns the exception
// into a Python RuntimeError carrying the message. C callers use uma_malloc, which never throws.
void* uma_torch_malloc(ptrdiff_t size, int device, uma_stream stream) {
  try {
    void* p = allocate(size, device, stream);
    observe(UMA_TORCH_ALLOC, p, static_cast<std::size_t>(size), device, stream);
    return p;
  } catch (const std::exception& e) {
    (void)fail(UMA_ERR_OUT_OF_MEMORY, e.what());
    observe(UMA_TORCH_OOM, nullptr, size < 0 ? 0 : static_cast<std::size_t>(size), device, stream);
    throw;
  }
}

void uma_torch_free(void* ptr, ptrdiff_t size, int device, uma_stream stream) {
  auto* a = uma::c::framework_allocator();
  if (size < 0 || a == nullptr)
    return;
  // Forgotten first: until uma_free returns the block is PyTorch's, so no allocation can get
  // its address and be tracked in its place.
  uma::c::process_torch_spill().forget(device, ptr);
  if (uma_free(a, ptr, static_cast<std::size_t>(size), device, stream) == UMA_OK) {
    uma::c::process_torch_ledger().freed(device, reinterpret_cast<std::uintptr_t>(ptr),
                                         static_cast<std::size_t>(size));
    observe(UMA_TORCH_FREE, ptr, static_cast<std::size_t>(size), device, stream);
  }
}

void uma_torch_empty_cache(void) {
  if (auto* a = uma::c::default_allocator_if_made())
    (void)uma_trim(a, nullptr);
}

void uma_torch_set_memory_fraction(double fraction, int device) {
  auto* a = uma::c::framework_allocator();
  if (a == nullptr || !(fraction > 0.0 && fraction <= 1.0) || device < 0 ||
      device >= a->backend->device_count())
    return;
  const auto memory = a->backend->capabilities(device).total_memory;
  const auto budget = static_cast<std::uint64_t>(fraction * static_cast<double>(memory));
  if (budget > 0 && uma_set_device_budget(a, device, budget) == UMA_OK)
    (void)uma::c::process_torch_spill().shrink_to(
        a, device, fraction < 1.0 ? budget : uma::c::torch_spill::no_limit);
}

uma_status uma_torch_memory_stats_json(int device, char* buffer, size_t capacity, size_t* needed) {
  return guarded([&] {
    if (auto* a = uma::c::default_allocator_if_made())
      sample(*a, device);
    return uma::c::copy_json(uma::c::process_torch_ledger().json(device), buffer, capacity, needed,
                             "uma_torch_memory_stats_json");
  });
}

uma_status uma_torch_live_json(int device, char* buffer, size_t capacity, size_t* needed) {
  return guarded([&] {
    return uma::c::copy_json(uma::c::process_torch_ledger().live_json(device), buffer, capacity,
                             needed, "uma_torch_live_json");
  });
}

uma_status uma_torch_reset_peak_memory_stats(int device) {
  return guarded([&] {
    if (auto* a = uma::c::default_allocator_if_made())
      sample(*a, device);
    uma::c::process_torch_ledger().reset_peaks(device);
    return UMA_OK;
  });
}

uma_status uma_torch_reset_accumulated_memory_stats(int device) {
  return guarded([&] {
    if (auto* a = uma::c::default_allocator_if_made())
      sample(*a, device);
    uma::c::process_torch_ledger().reset_accumulated(device);
    return UMA_OK;
  });
}

uint64_t uma_torch_spilled_bytes(void) {
  return uma::c::process_torch_spill().spilled_bytes();
}

void uma_torch_set_observer(uma_torch_observer o) {
  observer.store(o, std::memory_order_release);
}

}  // extern "C"
