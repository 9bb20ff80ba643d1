#pragma once

// Helpers of the CUDA sections (3-7): raw buffers that free themselves, wall-clock timing after
// a synchronize, bandwidth arithmetic.

#include <cstddef>
#include <cstdio>
#include <exception>
#include <utility>

#include "bench/bench_actors.hpp"
#include "bench/cuda_ops.hpp"

namespace uma::bench {

/// A raw CUDA allocation (managed, device or pinned) freed on scope exit.
class raw_buffer {
 public:
  enum class kind { managed, device, pinned };

  raw_buffer(kind k, std::size_t bytes) : kind_(k), bytes_(bytes) {
    ptr_ = k == kind::managed  ? cuda::malloc_managed(bytes)
           : k == kind::device ? cuda::malloc_device(bytes)
                               : cuda::malloc_pinned(bytes);
  }
  raw_buffer(raw_buffer&& other) noexcept
      : kind_(other.kind_), bytes_(other.bytes_), ptr_(std::exchange(other.ptr_, nullptr)) {}
  raw_buffer(const raw_buffer&) = delete;
  raw_buffer& operator=(const raw_buffer&) = delete;
  raw_buffer& operator=(raw_buffer&&) = delete;
  ~raw_buffer() {
    if (ptr_ == nullptr)
      return;
    try {
      if (kind_ == kind::pinned)
        cuda::free_pinned(ptr_);
      else if (kind_ == kind::device)
        cuda::free_device(ptr_);
      else
        cuda::free_managed(ptr_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "uma_bench: freeing a raw buffer failed: %s\n", e.what());
    }
  }

  [[nodiscard]] void* get() const noexcept { return ptr_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

 private:
  kind kind_;
  std::size_t bytes_;
  void* ptr_ = nullptr;
};

/// Milliseconds `f()` takes by the wall clock (`f` ends with a synchronize or a completion).
template <class F>
double wall_ms(F&& f) {
  const auto t0 = bench_clock::now();
  std::forward<F>(f)();
  return ns_between(t0, bench_clock::now()) / 1e6;
}

/// Decimal gigabytes per second of `bytes` moved in `ms` milliseconds.
[[nodiscard]] inline double gb_per_s(std::size_t bytes, double ms) {
  return static_cast<double>(bytes) / 1e9 / (ms / 1e3);
}

}  // namespace uma::bench
