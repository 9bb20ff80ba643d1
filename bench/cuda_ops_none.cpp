// uma_bench built without CUDA: the sections that need the raw-CUDA baselines check
// `compiled()` and report "skipped: no CUDA"; nothing else here is ever reached.

#include <stdexcept>

#include "bench/cuda_ops.hpp"

namespace uma::bench::cuda {

namespace {

[[noreturn]] void unavailable() {
  throw std::runtime_error("uma_bench was built without CUDA");
}

}  // namespace

bool compiled() noexcept {
  return false;
}

memory_info mem_info() {
  unavailable();
}

void* create_stream() {
  unavailable();
}

void destroy_stream(void*) noexcept {}

void synchronize(void*) {
  unavailable();
}

void* malloc_managed(std::size_t) {
  unavailable();
}

void free_managed(void*) {
  unavailable();
}

void* malloc_device(std::size_t) {
  unavailable();
}

void free_device(void*) {
  unavailable();
}

void* malloc_pinned(std::size_t) {
  unavailable();
}

void free_pinned(void*) {
  unavailable();
}

void fill(void*, std::size_t, std::uint32_t, void*) {
  unavailable();
}

void prefetch(const void*, std::size_t, int, void*) {
  unavailable();
}

void prefetch_and_wait(const void*, std::size_t, int, void*, bool, bool) {
  unavailable();
}

void prefetch_batch(const std::vector<void*>&, const std::vector<std::size_t>&, int, void*) {
  unavailable();
}

void advise_accessed_by(const void*, std::size_t, int) {
  unavailable();
}

void copy(void*, const void*, std::size_t, void*) {
  unavailable();
}

void read_async(const void*, std::size_t, void*) {
  unavailable();
}

void add_one_async(void*, std::size_t, void*) {
  unavailable();
}

double read_kernel_ms(const void*, std::size_t, void*) {
  unavailable();
}

std::vector<double> malloc_managed_pairs(std::size_t, int, int, double, bool) {
  unavailable();
}

managed_pool create_managed_pool() noexcept {
  return managed_pool{nullptr, false, {}, "uma_bench was built without CUDA"};
}

void destroy_managed_pool(managed_pool& pool) noexcept {
  pool.handle = nullptr;
}

std::vector<double> mempool_pairs(const managed_pool&, std::size_t, int, int, double, void*) {
  unavailable();
}

throughput malloc_managed_throughput(std::size_t, int, double) {
  unavailable();
}

throughput mempool_throughput(const managed_pool&, std::size_t, int, double) {
  unavailable();
}

}  // namespace uma::bench::cuda
