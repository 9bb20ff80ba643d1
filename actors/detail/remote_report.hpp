#pragma once

// The remote gateway's region report: attributes read for every leased row.

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <caf/typed_response_promise.hpp>

#include <uma/actors/detail/remote_sessions.hpp>
#include <uma/actors/detail/session_page.hpp>
#include <uma/memory/managed_ref.hpp>
#include <uma/messages/interface.hpp>
#include <uma/messages/remote_types.hpp>

namespace uma::detail {

/// Asks the supervisor for the attributes of every row of the page `out` that a session leases
/// (its ref is in `leased`) and delivers `out` through `rp` when all have answered; a region
/// freed meanwhile keeps `attributes_known` false.
template <class Self>
void read_attributes(Self* self, const allocator_supervisor_actor& supervisor,
                     caf::typed_response_promise<remote_region_page> rp,
                     std::shared_ptr<remote_region_page> out, const leased_map& leased) {
  auto remaining = std::make_shared<std::size_t>(0);
  for (const auto& row : out->rows)
    *remaining += row.session != 0 ? 1 : 0;
  if (*remaining == 0) {
    rp.deliver(std::move(*out));
    return;
  }
  for (std::size_t i = 0; i < out->rows.size(); ++i) {
    if (out->rows[i].session == 0)
      continue;
    const auto& ref = leased.at({out->rows[i].region.id, out->rows[i].region.generation});
    auto done = [rp, out, remaining]() mutable {
      if (--*remaining == 0)
        rp.deliver(std::move(*out));
    };
    self->request(supervisor, caf::infinite, attributes_atom_v, ref.second)
        .then(
            [out, i, done](range_attributes& a) mutable {
              out->rows[i].attributes_known = true;
              out->rows[i].attributes = to_remote(a);
              done();
            },
            [done](caf::error&) mutable { done(); });  // freed meanwhile: unknown
  }
}

/// Delivers page `p` (at most `cap` rows) of the supervisor's region report through `rp`, with
/// attributes read for the page's leased regions only; an error goes through `relay` first.
/// Session `only`'s page (unless it is 0) is cut from its own leases (own_page): it costs that
/// session's slice, never the whole report.
template <class Self, class Relay>
void gather_regions(Self* self, const allocator_supervisor_actor& supervisor,
                    caf::typed_response_promise<remote_region_page> rp,
                    const std::map<std::uint64_t, session>& sessions, std::uint64_t only,
                    region_page p, std::uint32_t cap, Relay relay) {
  if (only != 0) {
    auto [page, leased] = own_page(sessions.at(only).leases, only, p, cap);
    read_attributes(self, supervisor, rp, std::make_shared<remote_region_page>(std::move(page)),
                    leased);
    return;
  }
  self->request(supervisor, caf::infinite, regions_atom_v)
      .then(
          [self, supervisor, rp, &sessions, p, cap](std::vector<region_info>& rows) mutable {
            const auto leased = live_leases(sessions);
            auto out = std::make_shared<remote_region_page>(
                cut_page(report_rows(std::move(rows), leased), p, cap));
            read_attributes(self, supervisor, rp, out, leased);
          },
          [rp, relay](caf::error& err) mutable { rp.deliver(relay(std::move(err))); });
}

/// Delivers the allocator's stats through `rp`, with `add(out)` adding the gateway's counters and
/// the supervisor's restarts and state; an error goes through `relay` first.
template <class Self, class Add, class Relay>
void gather_stats(Self* self, const allocator_supervisor_actor& supervisor,
                  caf::typed_response_promise<remote_stats> rp, Add add, Relay relay) {
  self->request(supervisor, caf::infinite, stats_atom_v)
      .then(
          [self, supervisor, rp, add, relay](allocator_stats& a) mutable {
            remote_stats out;
            out.allocator = std::move(a);
            add(out);
            self->request(supervisor, caf::infinite, supervision_atom_v)
                .then(
                    [rp, out](supervision_stats& sv) mutable {
                      out.restarts = sv.restarts;
                      out.supervisor = sv.state;
                      rp.deliver(std::move(out));
                    },
                    [rp, relay](caf::error& err) mutable { rp.deliver(relay(std::move(err))); });
          },
          [rp, relay](caf::error& err) mutable { rp.deliver(relay(std::move(err))); });
}

}  // namespace uma::detail
