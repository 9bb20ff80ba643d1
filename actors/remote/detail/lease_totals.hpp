#pragma once

// Running totals of remote leases (actors/remote/detail/lease_book.hpp): what a session, a tenant
// or the whole gateway leases, kept as leases come and go so that admission and stats never walk
// the leases (issue 35, finding 4). Plain data; the gateway actor is its only user.

#include <cstdint>
#include <map>
#include <memory>

#include <uma/memory/managed_ref.hpp>

namespace uma::detail {

/// Totals of leases, kept per allocator incarnation: a lease of an incarnation that stopped
/// (its ref went inert) holds nothing, and an incarnation stops without telling anyone, so each
/// incarnation's totals count only while its control block says it is alive. A query costs one
/// liveness check per incarnation the totals still hold leases of (one, unless leases outlived
/// a restart and were not released yet), never one per lease.
///
/// Every change is applied to the parent too (a session's totals to its tenant's, a tenant's
/// to the gateway's), so each level is exact without being summed from the one below.
class lease_totals {
 public:
  /// Totals that pass every change on to `parent` (none: null).
  explicit lease_totals(std::shared_ptr<lease_totals> parent = nullptr) noexcept
      : parent_(std::move(parent)) {}
  lease_totals(const lease_totals&) = delete;
  lease_totals& operator=(const lease_totals&) = delete;
  /// Uncounts everything counted here, pending charges included, from the parent.
  ~lease_totals() {
    clear();
    settle(pending_);
  }

  /// Counts a lease of `ref`'s incarnation holding `bytes`, charged `charge`.
  void add(const byte_ref& ref, std::uint64_t bytes, std::uint64_t charge);
  /// Uncounts a lease of `ref`'s incarnation counted with `bytes` and `charge`.
  void remove(const byte_ref& ref, std::uint64_t bytes, std::uint64_t charge) noexcept;
  /// Uncounts every lease counted here (pending charges stay until settled).
  void clear() noexcept;
  /// An allocation of `charge` is underway: it counts as charged until `settle`.
  void reserve(std::uint64_t charge) noexcept;
  /// The allocation reserved with `charge` has been answered.
  void settle(std::uint64_t charge) noexcept;

  /// Leases counted, of live incarnations or not.
  [[nodiscard]] std::uint64_t leases() const noexcept { return leases_; }
  /// Leases of live incarnations.
  [[nodiscard]] std::uint64_t live_leases() const noexcept;
  /// Bytes of the leases of live incarnations.
  [[nodiscard]] std::uint64_t held_bytes() const noexcept;
  /// Charges of the leases of live incarnations plus the pending ones.
  [[nodiscard]] std::uint64_t charged() const noexcept;

 private:
  /// Uncounts `leases` leases of incarnation `key` with their `bytes` and `charge`.
  void take(const control_block* key, std::uint64_t leases, std::uint64_t bytes,
            std::uint64_t charge) noexcept;

  struct incarnation {
    std::shared_ptr<const control_block> control;  // says whether its leases still hold memory
    std::uint64_t leases = 0;
    std::uint64_t bytes = 0;
    std::uint64_t charge = 0;
  };

  // Keyed by the incarnation's control block (held by the value while its leases count).
  std::map<const control_block*, incarnation> incarnations_;
  std::uint64_t leases_ = 0;
  std::uint64_t pending_ = 0;
  std::shared_ptr<lease_totals> parent_;
};

}  // namespace uma::detail
