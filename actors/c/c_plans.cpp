// The C entry points of actors/c/uma.h for residency: budgets, plans by range, sequences, the
// report. Every one catches everything (actors/c/c_guard.hpp): no exception crosses into C.

#include <uma/actors/c/c_plans.hpp>

#include <algorithm>
#include <cstring>
#include <string>

#include <uma/actors/c/c_guard.hpp>

namespace uma::c {

access_plan_request plan_of(uma_allocator& a, const uma_plan_options* in, const char* what) {
  uma_plan_options o;
  uma_plan_options_init(&o);
  if (in != nullptr) {
    if (in->struct_size < sizeof(std::uint32_t))
      throw status_error(UMA_ERR_INVALID_ARGUMENT,
                         std::string(what) + ": options->struct_size " +
                             std::to_string(in->struct_size) +
                             " is too small (fill it with uma_plan_options_init)");
    std::memcpy(&o, in, std::min<std::size_t>(in->struct_size, sizeof o));
  }
  const auto mode = raw(o.mode);
  if (mode != UMA_ACCESS_READ && mode != UMA_ACCESS_WRITE)
    throw status_error(
        UMA_ERR_INVALID_ARGUMENT,
        std::string(what) + ": mode " + std::to_string(mode) + " is not a uma_access_mode value");
  const auto policy = raw(o.policy);
  if (policy < UMA_RESIDENCY_MIGRATE || policy > UMA_RESIDENCY_AUTO)
    throw status_error(UMA_ERR_INVALID_ARGUMENT, std::string(what) + ": policy " +
                                                     std::to_string(policy) +
                                                     " is not a uma_residency_policy value");
  access_plan_request s;
  s.device = o.device;  // the account refuses a device it does not have, naming it
  s.mode = static_cast<access_mode>(mode);
  s.policy = static_cast<residency_policy>(policy);
  s.stream = o.has_stream != 0 ? a.stream_of(o.stream) : stream_view{};
  s.reply_when = o.wait_complete != 0 ? completion::complete : completion::enqueued;
  s.tenant = o.tenant != nullptr ? std::string(o.tenant) : std::string{};
  s.cycle = {o.cycle_bytes, o.cycle_plans};
  return s;
}

std::vector<address_range> ranges_of(uma_allocator& a, const uma_range* ranges, std::size_t count,
                                     const char* what) {
  require(ranges, (std::string(what) + ": ranges").c_str());
  if (count == 0)
    throw status_error(UMA_ERR_INVALID_ARGUMENT, std::string(what) + ": a count of 0 ranges");
  std::vector<address_range> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const auto& r = ranges[i];
    const auto name = std::string(what) + ": ranges[" + std::to_string(i) + "]";
    require(r.ptr, (name + ".ptr").c_str());
    if (r.bytes == 0)
      throw status_error(UMA_ERR_INVALID_ARGUMENT, name + " has 0 bytes");
    try {
      (void)a.ref_of(r.ptr, r.bytes);  // a block handed out holds it (the block allocator's
                                       // or a large block's): else UMA_ERR_UNKNOWN_POINTER
    } catch (const status_error& e) {
      throw status_error(e.status, name + ": " + e.message);
    }
    out.push_back({reinterpret_cast<std::uintptr_t>(r.ptr), r.bytes});
  }
  return out;
}

void check_out(const std::uint32_t* struct_size, const char* what) {
  if (struct_size != nullptr && *struct_size < sizeof(std::uint32_t))
    throw status_error(UMA_ERR_INVALID_ARGUMENT, std::string(what) +
                                                     ": out->struct_size is not set (set it to the "
                                                     "struct's sizeof)");
}

void write_result(const residency_result& r, uma_plan_result* out) noexcept {
  if (out == nullptr)
    return;
  uma_plan_result c{};
  c.struct_size = static_cast<std::uint32_t>(std::min<std::size_t>(out->struct_size, sizeof c));
  c.to_device_bytes = r.to_device_bytes;
  c.to_host_bytes = r.to_host_bytes;
  c.dropped_bytes = r.dropped_bytes;
  c.discarded_bytes = r.discarded_bytes;
  c.mapped_bytes = r.mapped_bytes;
  c.placements = r.placements;
  c.evictions = r.evictions;
  std::memcpy(out, &c, c.struct_size);
}

}  // namespace uma::c

using uma::c::guarded;
using uma::c::require;
using uma::c::status_error;

extern "C" {

void uma_plan_options_init(uma_plan_options* options) {
  if (options == nullptr)
    return;
  *options = uma_plan_options{};
  options->struct_size = sizeof(uma_plan_options);
  options->mode = UMA_ACCESS_READ;
  options->policy = UMA_RESIDENCY_AUTO;
}

uma_status uma_set_device_budget(uma_allocator* a, int device, uint64_t bytes) {
  return guarded([&] {
    require(a, "uma_set_device_budget: allocator");
    const int devices = a->backend->device_count();
    if (device < 0 || device >= devices)
      throw status_error(UMA_ERR_NO_DEVICE,
                         "uma_set_device_budget: device " + std::to_string(device) + ": the " +
                             std::string(uma::to_string(a->backend->kind())) + " backend has " +
                             std::to_string(devices) + " device(s) whose residency to budget" +
                             (devices == 0 ? " (host: host_devices is 0)" : ""));
    if (bytes == 0)
      throw status_error(UMA_ERR_INVALID_ARGUMENT, "uma_set_device_budget: a budget of 0 bytes");
    (void)a->client->device_budget(device, bytes);
    return UMA_OK;
  });
}

uma_status uma_will_access(uma_allocator* a, const uma_range* ranges, size_t count,
                           const uma_plan_options* options, uma_plan_result* out) {
  return guarded([&] {
    require(a, "uma_will_access: allocator");
    uma::c::check_out(out != nullptr ? &out->struct_size : nullptr, "uma_will_access");
    auto plan = uma::c::plan_of(*a, options, "uma_will_access");
    plan.ranges = uma::c::ranges_of(*a, ranges, count, "uma_will_access");
    uma::c::write_result(a->client->will_access(std::move(plan)), out);
    return UMA_OK;
  });
}

uma_status uma_done_with(uma_allocator* a, const uma_range* ranges, size_t count) {
  return guarded([&] {
    require(a, "uma_done_with: allocator");
    (void)a->client->done_with(uma::c::ranges_of(*a, ranges, count, "uma_done_with"));
    return UMA_OK;
  });
}

uma_status uma_dead(uma_allocator* a, const uma_range* ranges, size_t count, uma_plan_result* out) {
  return guarded([&] {
    require(a, "uma_dead: allocator");
    uma::c::check_out(out != nullptr ? &out->struct_size : nullptr, "uma_dead");
    uma::c::write_result(a->client->dead(uma::c::ranges_of(*a, ranges, count, "uma_dead")), out);
    return UMA_OK;
  });
}

uma_status uma_sequence_create(uma_allocator* a, size_t lookahead, uma_sequence** out) {
  return guarded([&] {
    require(a, "uma_sequence_create: allocator");
    require(out, "uma_sequence_create: out");
    *out = new uma_sequence{a, lookahead, {}, nullptr};
    return UMA_OK;
  });
}

uma_status uma_sequence_add_step(uma_sequence* s, const uma_range* ranges, size_t count,
                                 const uma_plan_options* options) {
  return guarded([&] {
    require(s, "uma_sequence_add_step: sequence");
    if (s->running)
      throw status_error(UMA_ERR_INVALID_ARGUMENT,
                         "uma_sequence_add_step: the sequence has begun (steps are named before "
                         "the first uma_sequence_begin)");
    // The sequence knows its own cycle: the options' hint is not used here.
    auto p = uma::c::plan_of(*s->allocator, options, "uma_sequence_add_step");
    auto r = uma::c::ranges_of(*s->allocator, ranges, count, "uma_sequence_add_step");
    s->steps.push_back({{},
                        p.device,
                        p.mode,
                        p.policy,
                        p.stream,
                        p.reply_when,
                        std::move(p.tenant),
                        std::move(r)});
    return UMA_OK;
  });
}

uma_status uma_sequence_begin(uma_sequence* s, size_t step, uma_plan_result* out) {
  return guarded([&] {
    require(s, "uma_sequence_begin: sequence");
    uma::c::check_out(out != nullptr ? &out->struct_size : nullptr, "uma_sequence_begin");
    if (!s->running)  // refuses no step or a lookahead too long, naming them
      s->running =
          std::make_unique<uma::access_sequence>(*s->allocator->client, s->steps, s->lookahead);
    uma::c::write_result(s->running->begin(step), out);
    return UMA_OK;
  });
}

uma_status uma_sequence_finish(uma_sequence* s) {
  return guarded([&] {
    require(s, "uma_sequence_finish: sequence");
    if (s->running)
      s->running->finish();
    return UMA_OK;
  });
}

uma_status uma_sequence_destroy(uma_sequence* s) {
  if (s == nullptr)
    return UMA_OK;
  const auto status = uma_sequence_finish(s);
  delete s;  // whatever the finish said: the caller cannot use it again either way
  return status;
}

uma_status uma_get_residency(uma_allocator* a, uma_residency_report* out) {
  return guarded([&] {
    require(a, "uma_get_residency: allocator");
    require(out, "uma_get_residency: out");
    uma::c::check_out(&out->struct_size, "uma_get_residency");
    auto r = uma::c::report_of(a->client->residency());
    r.struct_size = static_cast<std::uint32_t>(std::min<std::size_t>(out->struct_size, sizeof r));
    std::memcpy(out, &r, r.struct_size);
    return UMA_OK;
  });
}

uma_status uma_residency_json(uma_allocator* a, char* buffer, size_t capacity, size_t* needed) {
  return guarded([&] {
    require(a, "uma_residency_json: allocator");
    return uma::c::copy_json(uma::c::report_json(a->client->residency()), buffer, capacity, needed,
                             "uma_residency_json");
  });
}

}  // extern "C"
