#pragma once

#include <uma/memory/memory_resource.hpp>

namespace uma {

/// A resource that wraps an upstream and forwards what it does not change. Ownership rule of
/// uma's stacks: an adaptor refers to its upstream and never owns it; whoever composes the
/// stack (memory/resource_stack.hpp, or a test) keeps every layer alive, bottom first.
class resource_adaptor : public memory_resource {
 public:
  /// Wraps `upstream`, which must outlive this adaptor.
  explicit resource_adaptor(memory_resource& upstream) noexcept : upstream_(upstream) {}

  /// The resource below this one.
  [[nodiscard]] memory_resource& upstream() const noexcept { return upstream_; }

 protected:
  allocation do_allocate(const allocation_request& r) override { return upstream_.allocate(r); }
  void do_deallocate(const allocation& a) noexcept override { upstream_.deallocate(a); }
  [[nodiscard]] std::size_t do_charge_for(std::size_t bytes, std::size_t alignment) const override {
    return upstream_.charge_for(bytes, alignment);
  }
  [[nodiscard]] resource_properties do_properties() const noexcept override {
    return upstream_.properties();
  }

 private:
  memory_resource& upstream_;
};

}  // namespace uma
