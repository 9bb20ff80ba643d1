#include <uma/actors/client.hpp>

namespace uma {

client::client(caf::actor_system& sys, managed_allocator_actor allocator)
    : sys_(sys), allocator_(std::move(allocator)), owns_(false) {}

client::client(caf::actor_system& sys, allocator_config config)
    : sys_(sys), allocator_(spawn_allocator(sys, std::move(config))), owns_(true) {}

client::~client() {
  if (owns_)
    stop();
}

op_result client::prefetch(std::vector<byte_ref> refs, std::vector<location> locations,
                           stream_view stream, completion when) {
  return call<op_result>(prefetch_atom_v,
                         prefetch_request{std::move(refs), std::move(locations), stream, when});
}

op_result client::discard(std::vector<byte_ref> refs, stream_view stream, completion when) {
  return call<op_result>(discard_atom_v, discard_request{std::move(refs), stream, when});
}

op_result client::discard_prefetch(std::vector<byte_ref> refs, std::vector<location> locations,
                                   stream_view stream, completion when) {
  return call<op_result>(discard_prefetch_atom_v,
                         prefetch_request{std::move(refs), std::move(locations), stream, when});
}

op_result client::advise(std::vector<byte_ref> refs, advice what, location where) {
  return call<op_result>(advise_atom_v, advise_request{std::move(refs), what, where});
}

memory_kind client::kind_of(const void* ptr) {
  return call<memory_kind>(memory_kind_atom_v, reinterpret_cast<std::uintptr_t>(ptr));
}

allocator_stats client::stats() {
  return call<allocator_stats>(stats_atom_v);
}

allocator_stats client::flush() {
  return call<allocator_stats>(flush_atom_v);
}

std::vector<region_info> client::regions() {
  return call<std::vector<region_info>>(regions_atom_v);
}

void client::stop() {
  if (!allocator_)
    return;
  caf::scoped_actor self{sys_};
  self->send_exit(allocator_, caf::exit_reason::user_shutdown);
  self->wait_for(allocator_);
  allocator_ = nullptr;
}

}  // namespace uma
