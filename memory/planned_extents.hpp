#pragma once

// The extents of pages that access plans cover (issue 25, docs/residency.md "Ranges"): per
// region, disjoint runs of 4 KiB pages, each an entry of the residency account with an id of its
// own. A plan's range is rounded outward to pages; where it overlaps extents already there they
// are split at its ends, so that every page is charged once and a plan charges exactly the pages
// it covers (a page two blocks share becomes a one-page extent that both blocks' plans hold).
// CAF-free and backend-free; one owner (the allocator's residency core).

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace uma {

/// Not thread-safe: one owner. Every call validates its input before it changes anything; a
/// refusal throws uma::error (invalid_argument) naming what was wrong.
class planned_extents {
 public:
  /// The unit of the account: plans round their ranges outward to it.
  static constexpr std::size_t page_bytes = 4096;

  /// One extent: bytes [offset, offset + bytes) of a region.
  struct extent {
    std::uint64_t id = 0;
    std::uint64_t region = 0;
    std::size_t offset = 0;  ///< a multiple of page_bytes
    std::size_t bytes = 0;   ///< whole pages, but for a region's last page when it is partial
    friend bool operator==(const extent&, const extent&) = default;
  };
  /// Extent `from` gave its last `bytes` to the new extent `to` (the account splits its entry
  /// the same way: residency_account::split).
  struct split {
    std::uint64_t from = 0;
    std::uint64_t to = 0;
    std::size_t bytes = 0;
  };
  /// What a range resolved to.
  struct cover {
    std::vector<extent> extents;         ///< covering the range, in address order
    std::vector<split> splits;           ///< made at the range's ends, in order
    std::vector<std::uint64_t> created;  ///< new extents for pages no extent had
  };

  /// Ids handed out start at `first_id` (never 0).
  explicit planned_extents(std::uint64_t first_id = 1) : next_id_(first_id == 0 ? 1 : first_id) {}

  /// The extents covering bytes [offset, offset + bytes) of `region` (which has `region_bytes`),
  /// rounded outward to pages: existing extents split at the range's ends, new extents for the
  /// pages none had. invalid_argument for an empty range or one past the region's end, or a
  /// region whose size changed (nothing changes).
  [[nodiscard]] cover cover_range(std::uint64_t region, std::size_t region_bytes,
                                  std::size_t offset, std::size_t bytes);
  /// The same for a range whose every page must be in an extent already (done_with, dead):
  /// invalid_argument naming `what` and the first page no plan covers (nothing changes).
  [[nodiscard]] cover planned_range(std::uint64_t region, std::size_t region_bytes,
                                    std::size_t offset, std::size_t bytes, const char* what);
  /// Removes extents made by cover_range that the account then refused (a refused plan leaves
  /// only its splits behind, which change no sum).
  void erase(std::span<const std::uint64_t> ids) noexcept;
  /// The allocator freed `region`: its extents go, each id passed to `f` (the account forgets
  /// it) first.
  template <class F>
  void forget(std::uint64_t region, F&& f) noexcept {
    const auto r = regions_.find(region);
    if (r == regions_.end())
      return;
    for (const auto& [first, p] : r->second.pieces) {
      f(p.id);
      where_.erase(p.id);
    }
    regions_.erase(r);
  }
  /// Every extent goes (the allocator stopped).
  void clear() noexcept {
    regions_.clear();
    where_.clear();
  }

  [[nodiscard]] std::optional<extent> find(std::uint64_t id) const noexcept;
  /// `region`'s extents, in address order.
  [[nodiscard]] std::vector<extent> of(std::uint64_t region) const;
  /// The bytes of `region` that extents cover.
  [[nodiscard]] std::size_t covered(std::uint64_t region) const noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return where_.size(); }

 private:
  struct piece {
    std::size_t end = 0;  // one past the last page
    std::uint64_t id = 0;
  };
  struct region_extents {
    std::size_t bytes = 0;
    std::map<std::size_t, piece> pieces;  // by first page
  };

  /// The region's pages [first, end) for the range; throws for a bad range.
  [[nodiscard]] static std::pair<std::size_t, std::size_t> pages_of(std::size_t region_bytes,
                                                                    std::size_t offset,
                                                                    std::size_t bytes,
                                                                    const char* what);
  [[nodiscard]] static extent extent_of(std::uint64_t region, const region_extents& r,
                                        std::size_t first, const piece& p) noexcept;
  /// Splits the piece holding `page` there, when it starts before it.
  void split_at(std::uint64_t region, region_extents& r, std::size_t page, std::vector<split>& out);
  /// After the splits: the range's extents, new ones made for pages none had.
  void collect(std::uint64_t region, region_extents& r, std::size_t first, std::size_t end,
               cover& out);

  std::unordered_map<std::uint64_t, region_extents> regions_;
  std::unordered_map<std::uint64_t, std::pair<std::uint64_t, std::size_t>> where_;  // id: region,
                                                                                    // first page
  std::uint64_t next_id_;
};

}  // namespace uma
