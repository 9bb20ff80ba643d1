#include <uma/actors/remote/wire/detail/arbiter_convert.hpp>

#include <algorithm>

namespace uma::detail {

namespace w = wire::v1;

void to_wire(const arbiter_claim& c, w::DeviceClaim& out) {
  out.set_device(c.device);
  out.set_min_bytes(c.min_bytes);
  out.set_wanted_bytes(c.wanted_bytes);
  out.set_priority(c.priority);
  out.set_weight(c.weight);
  out.set_idle(c.idle);
}

arbiter_claim from_wire(const w::DeviceClaim& c) {
  return {
      c.device(), c.min_bytes(), c.wanted_bytes(), c.priority(), c.weight() == 0 ? 1u : c.weight(),
      c.idle()};
}

void to_wire(const arbiter_grant& g, w::GrantEvent& out) {
  out.set_device(g.device);
  out.set_budget_bytes(g.budget_bytes);
  out.set_sequence(g.sequence);
  out.set_shrink(g.shrink);
  out.set_revoked(g.revoked);
  out.set_deadline_ms(static_cast<std::uint32_t>(
      std::clamp<std::int64_t>(g.deadline.count(), 0, std::int64_t{UINT32_MAX})));
  out.set_why(g.why);
}

arbiter_grant from_wire(const w::GrantEvent& g) {
  arbiter_grant out;
  out.member = g.key().id();
  out.device = g.device();
  out.budget_bytes = g.budget_bytes();
  out.sequence = g.sequence();
  out.shrink = g.shrink();
  out.revoked = g.revoked();
  out.deadline = std::chrono::milliseconds(g.deadline_ms());
  out.why = g.why();
  return out;
}

namespace {

void member_to_wire(const arbiter_member_row& m, w::ArbiterMember& out) {
  out.set_member(m.member);
  out.set_tenant(m.tenant);
  to_wire(m.claim, *out.mutable_claim());
  out.set_granted_bytes(m.granted_bytes);
  out.set_held_bytes(m.held_bytes);
  out.set_resident_bytes(m.resident_bytes);
  out.set_state(m.state);
  out.set_grown_bytes(m.grown_bytes);
  out.set_shrunk_bytes(m.shrunk_bytes);
  out.set_shrinks(m.shrinks);
  out.set_slowest_shrink_ms(static_cast<std::uint64_t>(m.slowest_shrink.count()));
}

arbiter_member_row member_from_wire(const w::ArbiterMember& m) {
  return {m.member(),
          m.tenant(),
          from_wire(m.claim()),
          m.granted_bytes(),
          m.held_bytes(),
          m.resident_bytes(),
          m.state(),
          m.grown_bytes(),
          m.shrunk_bytes(),
          m.shrinks(),
          std::chrono::milliseconds(m.slowest_shrink_ms())};
}

}  // namespace

void to_wire(const arbiter_report& r, w::ArbiterReport& out) {
  for (const auto& d : r.devices) {
    auto& o = *out.add_devices();
    o.set_device(d.device);
    o.set_total_bytes(d.total_bytes);
    o.set_held_bytes(d.held_bytes);
    for (const auto& m : d.members)
      member_to_wire(m, *o.add_members());
  }
  for (const auto& x : r.decisions) {
    auto& o = *out.add_decisions();
    o.set_at_ms(static_cast<std::uint64_t>(x.at.count()));
    o.set_member(x.member);
    o.set_tenant(x.tenant);
    o.set_device(x.device);
    o.set_from_bytes(x.from_bytes);
    o.set_to_bytes(x.to_bytes);
    o.set_why(x.why);
  }
  out.set_members(r.members);
  out.set_revocations(r.revocations);
}

arbiter_report from_wire(const w::ArbiterReport& r) {
  arbiter_report out;
  for (const auto& d : r.devices()) {
    arbiter_device_row row{d.device(), d.total_bytes(), d.held_bytes(), {}};
    for (const auto& m : d.members())
      row.members.push_back(member_from_wire(m));
    out.devices.push_back(std::move(row));
  }
  for (const auto& x : r.decisions())
    out.decisions.push_back({std::chrono::milliseconds(x.at_ms()), x.member(), x.tenant(),
                             x.device(), x.from_bytes(), x.to_bytes(), x.why()});
  out.members = r.members();
  out.revocations = r.revocations();
  return out;
}

}  // namespace uma::detail
