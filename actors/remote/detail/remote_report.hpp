#pragma once

// The remote gateway's region report: attributes read for every leased row.

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <caf/typed_response_promise.hpp>

#include <uma/actors/remote/detail/remote_sessions.hpp>
#include <uma/actors/remote/detail/session_page.hpp>
#include <uma/memory/managed_ref.hpp>
#include <uma/messages/interface.hpp>
#include <uma/messages/remote_types.hpp>

namespace uma::detail {

/// How many attribute reads one page keeps in flight: a page's reads wait for each other rather
/// than fill the allocator's mailbox at once, so that another tenant's call waits behind one
/// read per page being cut, not behind a page's 256 (issue 35, finding 4: 16 threads paging
/// 4,096 leases each took an honest tenant's p99 to 197 ms with all 256 sent at once, 45 ms
/// with 4 at a time and 34-37 ms one at a time, on a loaded 2-core machine). A page of 256 rows
/// costs 256 round trips.
inline constexpr std::size_t page_reads_in_flight = 1;

/// The attribute reads of one page: the rows a session leases, read `page_reads_in_flight` at a
/// time (one after the other), the page delivered when all have answered (a region freed meanwhile
/// keeps `attributes_known` false).
template <class Self>
struct page_reader : std::enable_shared_from_this<page_reader<Self>> {
  Self* self;
  allocator_supervisor_actor supervisor;
  caf::typed_response_promise<remote_region_page> rp;
  remote_region_page out;
  std::vector<std::pair<std::size_t, byte_ref>> reads;  // row index and the region's ref
  std::size_t next = 0;
  std::size_t answered = 0;

  void start() {
    if (reads.empty()) {
      rp.deliver(std::move(out));
      return;
    }
    for (std::size_t i = 0; i < page_reads_in_flight; ++i)
      send();
  }
  void send() {
    if (next == reads.size())
      return;
    const auto [row, ref] = reads[next++];
    auto me = this->shared_from_this();
    self->request(supervisor, caf::infinite, attributes_atom_v, ref)
        .then(
            [me, row = row](range_attributes& a) {
              me->out.rows[row].attributes_known = true;
              me->out.rows[row].attributes = to_remote(a);
              me->done();
            },
            [me](caf::error&) { me->done(); });  // freed meanwhile: unknown
  }
  void done() {
    if (++answered == reads.size()) {
      rp.deliver(std::move(out));
      return;
    }
    send();
  }
};

/// Reads the attributes of every row of `out` that a session leases (its ref is in `leased`)
/// and delivers `out` through `rp` when all have answered.
template <class Self>
void read_attributes(Self* self, const allocator_supervisor_actor& supervisor,
                     caf::typed_response_promise<remote_region_page> rp, remote_region_page out,
                     const leased_map& leased) {
  auto reader = std::make_shared<page_reader<Self>>();
  reader->self = self;
  reader->supervisor = supervisor;
  reader->rp = std::move(rp);
  for (std::size_t i = 0; i < out.rows.size(); ++i)
    if (out.rows[i].session != 0)
      reader->reads.emplace_back(
          i, leased.at({out.rows[i].region.id, out.rows[i].region.generation}).second);
  reader->out = std::move(out);
  reader->start();
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
    read_attributes(self, supervisor, rp, std::move(page), leased);
    return;
  }
  self->request(supervisor, caf::infinite, regions_atom_v)
      .then(
          [self, supervisor, rp, &sessions, p, cap](std::vector<region_info>& rows) mutable {
            const auto leased = live_leases(sessions);
            read_attributes(self, supervisor, rp,
                            cut_page(report_rows(std::move(rows), leased), p, cap), leased);
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
