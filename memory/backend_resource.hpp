#pragma once

#include <memory>

#include <uma/memory/memory_resource.hpp>

namespace uma {

/// The bottom of every stack: one backend allocation (cudaMallocManaged, or the host backend's
/// mmap) per request, padded for alignments above the backend's guarantee. Thread-safe as the
/// backend is.
class backend_resource final : public memory_resource {
 public:
  /// Allocates from `b`.
  explicit backend_resource(std::shared_ptr<backend> b);

  /// The backend underneath.
  [[nodiscard]] backend& get_backend() const noexcept { return *backend_; }

 protected:
  allocation do_allocate(const allocation_request& r) override;
  void do_deallocate(const allocation& a) noexcept override;
  /// bytes + alignment padding; throws `overflow` naming both.
  [[nodiscard]] std::size_t do_charge_for(std::size_t bytes, std::size_t alignment) const override;
  [[nodiscard]] resource_properties do_properties() const noexcept override { return props_; }

 private:
  std::shared_ptr<backend> backend_;
  resource_properties props_;
};

}  // namespace uma
