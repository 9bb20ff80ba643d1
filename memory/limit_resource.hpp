#pragma once

#include <atomic>
#include <mutex>

#include <uma/memory/resource_adaptor.hpp>

namespace uma {

/// The quota: the bytes held from the upstream (what the process holds from the driver: the
/// block allocator's slabs and direct regions) never pass the limit. Changeable at run time; a
/// failed upstream call gives its reservation back (as RMM's limiting_resource_adaptor does). The
/// one place uma checks a quota.
class limit_resource final : public resource_adaptor {
 public:
  /// Limits what is taken from `upstream` to `limit` bytes.
  limit_resource(memory_resource& upstream, std::size_t limit) noexcept
      : resource_adaptor(upstream), limit_(limit) {}

  /// The limit in force.
  [[nodiscard]] std::size_t limit() const noexcept {
    return limit_.load(std::memory_order_relaxed);
  }
  /// Bytes held from the upstream now.
  [[nodiscard]] std::size_t held() const noexcept { return held_.load(std::memory_order_relaxed); }
  /// Sets the limit to `bytes`. Throws `invalid_argument` (and changes nothing) when fewer
  /// bytes than are held now.
  void set_limit(std::size_t bytes);

 protected:
  allocation do_allocate(const allocation_request& r) override;
  void do_deallocate(const allocation& a) noexcept override;

 private:
  void reserve(std::size_t charged);
  void release(std::size_t charged) noexcept;

  std::mutex mutex_;  // orders reservations against set_limit; reads go lock-free
  std::atomic<std::size_t> limit_;
  std::atomic<std::size_t> held_{0};
};

}  // namespace uma
