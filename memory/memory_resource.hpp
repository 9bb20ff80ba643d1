#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <uma/sys/backend.hpp>

namespace uma {

/// What a resource is asked for. `alignment` is of the first byte the caller sees (a power of
/// two); `label` names the allocation in the tracking report.
struct allocation_request {
  std::size_t bytes = 0;
  std::size_t alignment = 1;
  attach_flag attach = attach_flag::global;  ///< managed memory only
  std::string label{};
  /// Managed memory (`cuda_managed`, the default), or a tier: `pinned_host` (the host tier) or
  /// `cuda_device` (device memory on `device`; docs/design.md "Tiers").
  memory_kind kind = memory_kind::cuda_managed;
  int device = 0;  ///< the device of `cuda_device` memory; ignored otherwise
};

/// Memory a resource handed out. A plain value: deallocate takes it back as it was returned.
struct allocation {
  void* base = nullptr;       ///< what the backend returned
  std::byte* data = nullptr;  ///< first byte the caller sees (base + alignment padding)
  std::size_t bytes = 0;      ///< what the caller asked for
  std::size_t charged = 0;    ///< bytes held for it (rounded, padded): what quota and stats count
  memory_kind kind = memory_kind::cuda_managed;  ///< as requested: how it is given back
  int device = 0;                                ///< as requested (cuda_device memory)
};

/// True for the kinds a resource hands out: managed memory and the two tiers.
[[nodiscard]] constexpr bool allocatable(memory_kind k) noexcept {
  return k == memory_kind::cuda_managed || k == memory_kind::pinned_host ||
         k == memory_kind::cuda_device;
}

/// What a resource (a whole stack: what its bottom) guarantees.
struct resource_properties {
  std::size_t alignment = 1;  ///< every allocation is aligned to this without padding
  std::size_t page = 4096;    ///< the unit advice and prefetch act on
};

/// A CAF-free memory resource in the style of RMM's: `allocate` may throw `uma::error`,
/// `deallocate` never throws. Adaptors (memory/resource_adaptor.hpp) stack on an upstream; the
/// allocator composes them in memory/resource_stack.hpp.
///
/// Thread-safety: every resource of uma may be called from any thread (the allocator's actor
/// and its general lane use one stack at once).
class memory_resource {
 public:
  memory_resource() = default;
  memory_resource(const memory_resource&) = delete;
  memory_resource& operator=(const memory_resource&) = delete;
  virtual ~memory_resource() = default;

  /// Memory for `r`. Throws `invalid_argument` (zero bytes, alignment not a power of two),
  /// `overflow` (the charge does not fit size_t), `quota_exceeded`, `out_of_memory` or the
  /// backend's error.
  [[nodiscard]] allocation allocate(const allocation_request& r);
  /// Gives `a` back (exactly as allocate returned it).
  void deallocate(const allocation& a) noexcept { do_deallocate(a); }
  /// The bytes `bytes` at `alignment` would be charged: the stack's one rounding rule (the
  /// backend's: bytes plus alignment padding). Throws `overflow`.
  [[nodiscard]] std::size_t charge_for(std::size_t bytes, std::size_t alignment) const {
    return do_charge_for(bytes, alignment);
  }
  /// What every allocation of this resource guarantees.
  [[nodiscard]] resource_properties properties() const noexcept { return do_properties(); }

 protected:
  virtual allocation do_allocate(const allocation_request& r) = 0;
  virtual void do_deallocate(const allocation& a) noexcept = 0;
  [[nodiscard]] virtual std::size_t do_charge_for(std::size_t bytes,
                                                  std::size_t alignment) const = 0;
  [[nodiscard]] virtual resource_properties do_properties() const noexcept = 0;

 private:
  static void validate(const allocation_request& r);
};

}  // namespace uma
