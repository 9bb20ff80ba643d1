#include <uma/actors/remote/wire/detail/wire_convert.hpp>

#include <type_traits>

#include <uma/memory/stats_fields.hpp>
#include <uma/sys/error.hpp>

namespace uma::detail {

namespace w = wire::v1;

std::uint8_t enum_byte(std::uint32_t value, const char* field) {
  if (value > 255)
    raise(errc::invalid_argument,
          std::string(field) + ": " + std::to_string(value) + " is out of range");
  return static_cast<std::uint8_t>(value);
}

namespace {

template <class E>
[[nodiscard]] E to_enum(std::uint32_t value, const char* field) {
  return static_cast<E>(enum_byte(value, field));
}

template <class E>
[[nodiscard]] std::uint32_t from_enum(E e) {
  return static_cast<std::uint32_t>(static_cast<std::underlying_type_t<E>>(e));
}

}  // namespace

session_key from_wire(const w::SessionKey& k) {
  return {k.id(), k.secret_hi(), k.secret_lo()};
}

void to_wire(const session_key& k, w::SessionKey& out) {
  out.set_id(k.id);
  out.set_secret_hi(k.secret_hi);
  out.set_secret_lo(k.secret_lo);
}

region_handle from_wire(const w::RegionHandle& h) {
  return {h.id(), h.generation()};
}

void to_wire(const region_handle& h, w::RegionHandle& out) {
  out.set_id(h.id);
  out.set_generation(h.generation);
}

location from_wire(const w::Location& l) {
  return {to_enum<location::kind>(l.kind(), "location kind"), l.id()};
}

void to_wire(const location& l, w::Location& out) {
  out.set_kind(from_enum(l.type));
  out.set_id(l.id);
}

std::vector<region_handle> from_wire(
    const google::protobuf::RepeatedPtrField<w::RegionHandle>& hs) {
  std::vector<region_handle> out;
  out.reserve(static_cast<std::size_t>(hs.size()));
  for (const auto& h : hs)
    out.push_back(from_wire(h));
  return out;
}

remote_allocate_request from_wire(const w::AllocateRequest& r) {
  return {r.bytes(), r.alignment(), to_enum<attach_flag>(r.attach(), "attach flag"), r.label()};
}

remote_prefetch_request from_wire(const w::PrefetchRequest& r) {
  remote_prefetch_request out{from_wire(r.regions()), {}, {}};
  for (const auto& l : r.locations())
    out.locations.push_back(from_wire(l));
  out.reply_when = to_enum<completion>(r.reply_when(), "completion");
  return out;
}

remote_discard_request from_wire(const w::DiscardRequest& r) {
  return {from_wire(r.regions()), to_enum<completion>(r.reply_when(), "completion")};
}

remote_advise_request from_wire(const w::AdviseRequest& r) {
  return {from_wire(r.regions()), to_enum<advice>(r.advice(), "advice"),
          r.has_where() ? from_wire(r.where()) : location::host()};
}

remote_access_plan from_wire(const w::AccessPlan& r) {
  return {from_wire(r.regions()), r.device(), to_enum<access_mode>(r.mode(), "access mode"),
          to_enum<residency_policy>(r.policy(), "residency policy"),
          to_enum<completion>(r.reply_when(), "completion")};
}

void to_wire(const remote_op_result& r, w::OpResult& out) {
  out.set_ranges(r.ranges);
  out.set_bytes(r.bytes);
  out.set_completed(r.completed);
  out.set_backend_ranges(r.backend_ranges);
}

remote_op_result from_wire(const w::OpResult& r) {
  return {r.ranges(), r.bytes(), r.completed(), r.backend_ranges()};
}

void to_wire(const residency_result& r, w::ResidencyResult& out) {
  out.set_to_device_bytes(r.to_device_bytes);
  out.set_to_host_bytes(r.to_host_bytes);
  out.set_dropped_bytes(r.dropped_bytes);
  out.set_discarded_bytes(r.discarded_bytes);
  out.set_mapped_bytes(r.mapped_bytes);
  out.set_placements(r.placements);
  out.set_evictions(r.evictions);
}

residency_result from_wire(const w::ResidencyResult& r) {
  return {r.to_device_bytes(), r.to_host_bytes(), r.dropped_bytes(), r.discarded_bytes(),
          r.mapped_bytes(),    r.placements(),    r.evictions()};
}

void to_wire(const remote_attributes& a, w::Attributes& out) {
  out.set_read_mostly(a.read_mostly);
  if (a.has_preferred_location)
    to_wire(a.preferred_location, *out.mutable_preferred_location());
  for (const auto& l : a.accessed_by)
    to_wire(l, *out.add_accessed_by());
  if (a.has_last_prefetch_location)
    to_wire(a.last_prefetch_location, *out.mutable_last_prefetch_location());
}

remote_attributes from_wire(const w::Attributes& a) {
  remote_attributes out;
  out.read_mostly = a.read_mostly();
  out.has_preferred_location = a.has_preferred_location();
  if (out.has_preferred_location)
    out.preferred_location = from_wire(a.preferred_location());
  for (const auto& l : a.accessed_by())
    out.accessed_by.push_back(from_wire(l));
  out.has_last_prefetch_location = a.has_last_prefetch_location();
  if (out.has_last_prefetch_location)
    out.last_prefetch_location = from_wire(a.last_prefetch_location());
  return out;
}

void to_wire(const allocator_stats& s, w::AllocatorStats& out) {
  for_each_stats_field([&](const auto& f) {
    using type = stats_field_type<decltype(f)>;
    const auto& value = s.*f.member;
    const std::string name(f.name);
    if constexpr (std::is_same_v<type, std::string>)
      out.set_backend(value);
    else if constexpr (std::is_same_v<type, double>)
      (*out.mutable_ratios())[name] = value;
    else if constexpr (std::is_same_v<type, std::uint64_t>)
      (*out.mutable_counters())[name] = value;
    else
      for (const auto n : value)
        out.add_failures(n);
  });
}

allocator_stats from_wire(const w::AllocatorStats& s) {
  allocator_stats out;
  for_each_stats_field([&](const auto& f) {
    using type = stats_field_type<decltype(f)>;
    auto& value = out.*f.member;
    const std::string name(f.name);
    if constexpr (std::is_same_v<type, std::string>) {
      value = s.backend();
    } else if constexpr (std::is_same_v<type, double>) {
      const auto it = s.ratios().find(name);
      value = it == s.ratios().end() ? 0.0 : it->second;
    } else if constexpr (std::is_same_v<type, std::uint64_t>) {
      const auto it = s.counters().find(name);
      value = it == s.counters().end() ? 0 : it->second;
    } else {
      for (std::size_t i = 0; i < value.size() && i < static_cast<std::size_t>(s.failures_size());
           ++i)
        value[i] = s.failures(static_cast<int>(i));
    }
  });
  return out;
}

void to_wire(const remote_stats& s, w::Stats& out) {
  to_wire(s.allocator, *out.mutable_allocator());
  out.set_restarts(s.restarts);
  out.set_supervisor(from_enum(s.supervisor));
  out.set_sessions(s.sessions);
  out.set_sessions_lost(s.sessions_lost);
  out.set_leases(s.leases);
  out.set_leased_bytes(s.leased_bytes);
}

remote_stats from_wire(const w::Stats& s) {
  remote_stats out;
  out.allocator = from_wire(s.allocator());
  out.restarts = s.restarts();
  if (s.supervisor() > static_cast<std::uint32_t>(supervisor_state::stopped))
    raise(errc::invalid_argument,
          "supervisor state: " + std::to_string(s.supervisor()) + " is out of range");
  out.supervisor = static_cast<supervisor_state>(s.supervisor());
  out.sessions = s.sessions();
  out.sessions_lost = s.sessions_lost();
  out.leases = s.leases();
  out.leased_bytes = s.leased_bytes();
  return out;
}

void to_wire(const region_info& r, w::RegionInfo& out) {
  out.set_id(r.id);
  out.set_generation(r.generation);
  out.set_bytes(r.bytes);
  out.set_label(r.label);
  out.set_attach(from_enum(r.attach));
  out.set_refs(r.refs);
  out.set_pins(r.pins);
  out.set_age_ms(r.age_ms);
}

region_info from_wire(const w::RegionInfo& r) {
  return {r.id(),
          r.generation(),
          r.bytes(),
          r.label(),
          to_enum<attach_flag>(r.attach(), "attach flag"),
          r.refs(),
          r.pins(),
          r.age_ms()};
}

void to_wire(const remote_region_info& r, w::RegionRow& out) {
  to_wire(r.region, *out.mutable_region());
  out.set_session(r.session);
  if (r.attributes_known)
    to_wire(r.attributes, *out.mutable_attributes());
}

remote_region_info from_wire(const w::RegionRow& r) {
  remote_region_info out;
  out.region = from_wire(r.region());
  out.session = r.session();
  out.attributes_known = r.has_attributes();
  if (out.attributes_known)
    out.attributes = from_wire(r.attributes());
  return out;
}

void to_wire(const remote_snapshot& s, w::Snapshot& out) {
  out.set_taken_at_ns(s.taken_at_ns);
  out.set_generation(s.generation);
  out.set_backend(s.backend);
  to_wire(s.stats, *out.mutable_stats());
  for (const auto& r : s.regions) {
    auto& row = *out.add_regions();
    to_wire(r.info, *row.mutable_info());
    row.set_policy(from_enum(r.policy));
    row.set_advice(r.advice);
    if (r.has_last_prefetch)
      to_wire(r.last_prefetch, *row.mutable_last_prefetch());
    row.set_session(r.session);
  }
  for (const auto& e : s.events) {
    auto& ev = *out.add_events();
    ev.set_time_ns(e.time_ns);
    ev.set_kind(from_enum(e.kind));
    ev.set_generation(e.generation);
    ev.set_region(e.region);
    ev.set_bytes(e.bytes);
    ev.set_label(e.label);
    ev.set_detail(e.detail);
  }
  out.set_events_dropped(s.events_dropped);
  out.set_event_capacity(s.event_capacity);
}

remote_snapshot from_wire(const w::Snapshot& s) {
  remote_snapshot out{
      s.taken_at_ns(),    s.generation(),    s.backend(), from_wire(s.stats()), {}, {},
      s.events_dropped(), s.event_capacity()};
  for (const auto& r : s.regions())
    out.regions.push_back({from_wire(r.info()), to_enum<region_policy>(r.policy(), "policy"),
                           r.advice(), r.has_last_prefetch(),
                           r.has_last_prefetch() ? from_wire(r.last_prefetch()) : location::host(),
                           r.session()});
  for (const auto& e : s.events())
    out.events.push_back({e.time_ns(), to_enum<event_kind>(e.kind(), "event kind"), e.generation(),
                          e.region(), e.bytes(), e.label(), e.detail()});
  return out;
}

std::vector<w::Snapshot> split_snapshot(w::Snapshot full, std::size_t max_bytes) {
  std::vector<w::Snapshot> out;
  auto regions = std::move(*full.mutable_regions());
  auto events = std::move(*full.mutable_events());
  full.clear_regions();
  full.clear_events();
  out.push_back(std::move(full));
  std::size_t bytes = max_bytes;  // the header goes alone: the first region opens a message
  const auto room_for = [&](std::size_t size) {
    if (bytes + size > max_bytes && bytes != 0) {
      out.emplace_back();
      bytes = 0;
    }
    bytes += size;
    return &out.back();
  };
  for (auto& r : regions)
    room_for(r.ByteSizeLong() + 8)->add_regions()->Swap(&r);
  for (auto& e : events)
    room_for(e.ByteSizeLong() + 8)->add_events()->Swap(&e);
  return out;
}

void merge_snapshot(w::Snapshot& into, w::Snapshot& part) {
  for (auto& r : *part.mutable_regions())
    into.add_regions()->Swap(&r);
  for (auto& e : *part.mutable_events())
    into.add_events()->Swap(&e);
}

}  // namespace uma::detail
