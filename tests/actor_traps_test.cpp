// What an actor meets when it uses uma directly (docs/api.md "From actors"): typed refs travel
// in messages like byte_ref, and a request to a stopped allocator maps to allocator_stopped.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/managed_allocator.hpp>
#include <uma/messages/error_category.hpp>
#include "support/actor_fixture.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;
using actor_traps = test::actor_fixture;

/// A worker that receives a typed ref, reads it through a pin and replies the sum times
/// `scale`. (It takes an argument: CAF 0.17 spawns an argument-less function actor through a
/// null pointer, which UBSan reports.)
caf::behavior summing_worker(caf::event_based_actor*, float scale) {
  return {[scale](const ManagedRef<float>& batch) {
    float sum = 0;
    for (const float x : batch.pin())
      sum += x;
    return sum * scale;
  }};
}

TEST_F(actor_traps, ATypedRefTravelsInAMessageBetweenActors) {
  auto batch = uma_->allocate<float>(64);
  {
    auto pin = batch.pin();
    std::fill(pin.begin(), pin.end(), 0.5f);
  }
  auto worker = sys_.spawn(summing_worker, 2.0f);
  caf::scoped_actor self{sys_};
  float sum = -1;
  self->request(worker, 10s, batch)
      .receive([&](float s) { sum = s; }, [](const caf::error& e) { FAIL() << caf::to_string(e); });
  EXPECT_EQ(sum, 64.0f);
  static_assert(caf::allowed_unsafe_message_type<std::vector<ManagedRef<double>>>::value,
                "a vector of typed refs is a message type too");
  caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
}

TEST_F(actor_traps, ARawRequestToAStoppedAllocatorMapsToAllocatorStopped) {
  auto handle = spawn_allocator(sys_, host_config());
  caf::scoped_actor self{sys_};
  self->monitor(handle);
  self->send_exit(handle, caf::exit_reason::user_shutdown);
  self->receive([](const caf::down_msg&) {});
  caf::error raw;
  self->request(handle, 10s, stats_atom_v)
      .receive([](const allocator_stats&) { ADD_FAILURE() << "a stopped allocator replied"; },
               [&](const caf::error& e) { raw = e; });
  EXPECT_EQ(raw, caf::sec::request_receiver_down);  // what CAF answers for a stopped actor
  EXPECT_EQ(to_uma_error(raw).code(), errc::allocator_stopped);  // what an actor should check
  EXPECT_EQ(to_uma_error(make_caf_error(errc::quota_exceeded, "q")).code(), errc::quota_exceeded);
}

}  // namespace
}  // namespace uma
