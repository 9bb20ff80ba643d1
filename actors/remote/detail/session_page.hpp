#pragma once

// A tenant's page of the region table (`leased_regions_atom`), cut from its session's own
// leases (actors/remote/detail/lease_book.hpp) instead of the allocator's whole report: what a page
// costs is the session's own slice, whatever other tenants hold (issue 35, finding 4).

#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>

#include <uma/actors/remote/detail/lease_book.hpp>
#include <uma/actors/remote/detail/remote_sessions.hpp>
#include <uma/messages/remote_types.hpp>

namespace uma::detail {

/// The row the allocator's report shows for `l` (leased as `h`), or nothing when the report has
/// none for it: a lease of a stopped incarnation, or an unlabelled block (the report lists a
/// block only for its label). Counts and age are read now, as the report reads them; the age
/// runs from when the lease was taken.
[[nodiscard]] std::optional<region_info> lease_row(const region_handle& h, const lease& l,
                                                   std::chrono::steady_clock::time_point now);

/// Page `p` (at most `cap` rows, as `cut_page` cuts) of session `sid`'s rows of the region
/// report, in the report's order (by id), each with `sid`; and the refs of the page's rows, to
/// read their attributes with. Visits the session's own leases only.
[[nodiscard]] std::pair<remote_region_page, leased_map> own_page(const lease_book& book,
                                                                 std::uint64_t sid, region_page p,
                                                                 std::uint32_t cap);

}  // namespace uma::detail
