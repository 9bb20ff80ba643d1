#include <uma/actors/detail/incarnation_state.hpp>

namespace uma::detail {

incarnation_state::incarnation_state(const allocator_config& config, std::shared_ptr<backend> b,
                                     const std::shared_ptr<control_block>& control,
                                     worker_lanes& lanes)
    : runtime(std::move(b)),
      control(*control),
      lanes(lanes),
      core(config, runtime, control, lanes),
      residency(config, runtime, core),
      ticker(*control, core),
      jobs(lanes, runtime) {
  core.set_on_free([this](std::uint64_t id) { residency.forget(id); });
}

allocation_request incarnation_state::checked(const allocate_request& r) {
  auto req = core.checked_request(r);
  if (req.kind == memory_kind::cuda_device)
    residency.check_reserve(req.device, req.bytes);
  return req;
}

byte_ref incarnation_state::adopt(const allocation& memory, attach_flag attach) {
  auto ref = core.adopt(memory, attach);
  if (memory.kind == memory_kind::cuda_device) {
    auto made_room = residency.reserve(ref);
    run_evictions(made_room);
  }
  return ref;
}

std::uint64_t incarnation_state::make_room() {
  const auto bytes = core.blocks()->trim();  // its slabs come back as releases
  drain();
  return bytes;
}

}  // namespace uma::detail
