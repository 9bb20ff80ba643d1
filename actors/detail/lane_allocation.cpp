#include <uma/actors/detail/lane_allocation.hpp>

#include <uma/actors/detail/incarnation.hpp>

namespace uma::detail {

bool retried_on_lane(errc code) noexcept {
  return code == errc::quota_exceeded || code == errc::out_of_memory;
}

bool retried_on_lane(const error& e) noexcept {
  return !is_fatal(e) && retried_on_lane(e.code());  // a fatal error ends the incarnation
}

byte_ref lane_allocation_ref(incarnation_state& s, caf::message& payload, attach_flag attach) {
  if (payload.match_elements<byte_ref>())  // a block: the job took it
    return payload.get_as<byte_ref>(0);
  auto handoff = payload.get_as<allocation_handoff>(0);  // a copy: shares the state
  auto memory = handoff.take();
  if (!memory)
    raise(errc::backend_error, "allocate: the lane job's reply carried no allocation");
  return s.adopt(*memory, attach);
}

}  // namespace uma::detail
