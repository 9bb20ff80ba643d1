#pragma once

#include <atomic>
#include <cstdint>

#include <uma/memory/resource_adaptor.hpp>

namespace uma {

/// A snapshot of a statistics_resource. Bytes are charged bytes (rounded, padded).
struct resource_statistics {
  std::uint64_t current_bytes = 0;
  std::uint64_t current_count = 0;
  std::uint64_t peak_bytes = 0;
  std::uint64_t total_bytes = 0;  ///< ever allocated
  std::uint64_t allocations = 0;
  std::uint64_t deallocations = 0;
  std::uint64_t failures = 0;  ///< allocate calls that threw
};

/// Counts what passes through it: current, peak and total bytes, and calls per operation.
/// Atomic counters, so that a synchronous caller reads them without the actor.
class statistics_resource final : public resource_adaptor {
 public:
  /// Counts what goes through to `upstream`.
  explicit statistics_resource(memory_resource& upstream) noexcept : resource_adaptor(upstream) {}

  /// The counters now (each read atomically; the set is not one instant under load).
  [[nodiscard]] resource_statistics statistics() const noexcept;

 protected:
  allocation do_allocate(const allocation_request& r) override;
  void do_deallocate(const allocation& a) noexcept override;

 private:
  void count(const allocation& a) noexcept;

  std::atomic<std::uint64_t> current_bytes_{0}, current_count_{0}, peak_bytes_{0};
  std::atomic<std::uint64_t> total_bytes_{0}, allocations_{0}, deallocations_{0};
  std::atomic<std::uint64_t> failures_{0};
};

}  // namespace uma
