#pragma once

// One remote session's leases (actors/remote/remote_gateway.cpp): the regions it holds, what they
// count against its tenant's quota, and their release. Plain data; the gateway actor owns one
// per session and is its only user.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <uma/actors/remote/detail/lease_totals.hpp>
#include <uma/memory/managed_ref.hpp>
#include <uma/messages/remote_types.hpp>

namespace uma::detail {

/// Why a handle names no live lease of a book.
struct lease_miss {
  region_handle wanted{};
  bool held_inert = false;  ///< the book leases exactly `wanted`, but its incarnation stopped
  std::optional<region_handle> same_id{};  ///< the book's lease of that id in another generation
};

/// What a lease was asked with that its row in the region report shows.
struct lease_origin {
  std::string label{};
  attach_flag attach = attach_flag::global;
};

/// One lease of a book.
struct lease {
  byte_ref ref;
  std::uint64_t bytes = 0;  ///< what the region holds for the user, while its incarnation lives
  std::uint64_t charge = 0;
  lease_origin origin{};
  std::chrono::steady_clock::time_point created{};  ///< when it was taken
};

/// What a book let go of at once (`release_all`).
struct leases_released {
  std::uint64_t leases = 0;
  std::uint64_t bytes = 0;  ///< of live leases (a stopped incarnation's hold none)
};

/// A session's leases. Holding a lease's ref keeps its region allocated on the serving node:
/// a release drops the ref, and the allocator frees what nobody else holds. Each lease carries
/// its charge (what its region holds, alignment padding and rounding included, plus its label's
/// bytes: the serving node keeps the label as long as the region lives); allocations still
/// underway are charged as pending, at the most they may hold, until they settle.
///
/// The book keeps its totals as leases come and go (actors/remote/detail/lease_totals.hpp) and
/// passes every change on to its tenant's totals, so no query walks the leases; the walks it does
/// make (for_each_live, resolve's search for the same id, release_all) are counted in
/// `leases_visited`, which says what a request cost.
class lease_book {
 public:
  /// A book whose changes also count in `tenant` (none: null).
  explicit lease_book(std::shared_ptr<lease_totals> tenant = nullptr) noexcept
      : totals_(std::move(tenant)) {}
  lease_book(const lease_book&) = delete;
  lease_book& operator=(const lease_book&) = delete;

  /// Leases `ref` (a region of the current incarnation, asked for as `origin` says) with
  /// `charge`; returns its handle. A lease of the same handle is replaced.
  region_handle add(byte_ref ref, std::uint64_t charge, lease_origin origin = {});
  /// Ends the lease of `h`: the bytes it held (0 for a stopped incarnation's), or nullopt when
  /// the book leases no `h` (nothing changes).
  [[nodiscard]] std::optional<std::uint64_t> release(const region_handle& h);
  /// Ends every lease (the session ends): how many there were and the bytes they held.
  leases_released release_all() noexcept;

  /// An allocation of `charge` is underway: it counts against the quota until `settle`.
  void reserve(std::uint64_t charge) noexcept { totals_.reserve(charge); }
  /// The allocation reserved with `charge` has been answered (a lease or an error).
  void settle(std::uint64_t charge) noexcept { totals_.settle(charge); }

  /// The refs of `handles`, each a live lease of the book, appended to `refs`; or the first
  /// handle that is not (`refs` may then hold the ones before it).
  [[nodiscard]] std::optional<lease_miss> resolve(const std::vector<region_handle>& handles,
                                                  std::vector<byte_ref>& refs) const;
  /// Calls `f(handle, ref)` for each live lease (a stopped incarnation's are skipped).
  void for_each_live(const std::function<void(const region_handle&, const byte_ref&)>& f) const;
  /// Calls `f(handle, lease)` for each lease, live or not, in the order of the handles.
  void for_each_lease(const std::function<void(const region_handle&, const lease&)>& f) const;

  /// Leases held, live or not (each counts against the session's lease cap until released).
  [[nodiscard]] std::size_t size() const noexcept { return leases_.size(); }
  /// Live leases (the rows of the session's region page).
  [[nodiscard]] std::uint64_t live() const noexcept { return totals_.live_leases(); }
  /// Bytes of the live leases.
  [[nodiscard]] std::uint64_t held_bytes() const noexcept { return totals_.held_bytes(); }
  /// What the book counts against its tenant's quota now: live leases' charges and pending ones.
  [[nodiscard]] std::uint64_t charged() const noexcept { return totals_.charged(); }
  /// Leases the book's walks have looked at since it was made.
  [[nodiscard]] std::uint64_t leases_visited() const noexcept { return visited_; }

 private:
  std::map<region_handle, lease> leases_;
  lease_totals totals_;  // pending charges included
  mutable std::uint64_t visited_ = 0;
};

}  // namespace uma::detail
