#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <uma/actors/allocator_config.hpp>

namespace uma {

/// The settings a supervisor owns and gives every incarnation: the quota and the residency
/// budgets. A settings request sent to the supervisor changes this value first (checked, nothing
/// changed on bad input) and then reaches the current incarnation; each new incarnation starts
/// from it. A request sent straight to an incarnation changes that incarnation only.
struct allocator_settings {
  /// Most bytes the allocator may hold from the backend; 0: the backend's default.
  std::uint64_t quota_bytes = 0;
  /// The residency budgets, as an incarnation's config holds them.
  residency_budgets residency{};

  /// The settings a config starts an incarnation with.
  [[nodiscard]] static allocator_settings of(const allocator_config& config);

  /// Writes these settings into `config` (`memory.quota_bytes` and `residency`; the rest stays).
  void apply_to(allocator_config& config) const;

  /// `quota_atom`: a quota of `bytes` (0 asks and changes nothing).
  void set_quota(std::uint64_t bytes) noexcept;

  /// `budget_atom`: device `device`'s budget is `bytes` (0 asks and changes nothing). Throws
  /// `uma::error` (invalid_argument, naming the device and bytes) when the backend, whose
  /// devices have `device_memory` bytes, would refuse it; then nothing changed.
  void set_budget(int device, std::uint64_t bytes, const std::vector<std::size_t>& device_memory);

  /// `tenant_budget_atom`: `tenant`'s budget on `device` is `bytes` (0 removes it). Throws as
  /// `set_budget` does; then nothing changed.
  void set_tenant_budget(const std::string& tenant, int device, std::uint64_t bytes,
                         const std::vector<std::size_t>& device_memory);

  /// Throws `uma::error` (invalid_argument) when a backend whose devices have `device_memory`
  /// bytes would refuse one of these budgets, or the overflow mode does not exist.
  void check(const std::vector<std::size_t>& device_memory) const;
};

}  // namespace uma
