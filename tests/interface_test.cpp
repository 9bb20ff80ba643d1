// The allocator's interface cut by role (messages/interface.hpp): the slices partition the whole
// interface, each atom means one request (there and in the remote interface), and a handle of
// the whole narrows to each slice and
// works through it.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <type_traits>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/client.hpp>
#include <uma/messages/interface.hpp>
#include <uma/messages/register_types.hpp>
#include <uma/messages/remote_interface.hpp>

namespace uma {
namespace {

template <class Sig>
struct atom_of;
template <class Atom, class... Ins, class Out>
struct atom_of<caf::typed_mpi<caf::detail::type_list<Atom, Ins...>, Out>> {
  using type = Atom;
};

template <class... Sigs>
constexpr bool atoms_distinct(caf::detail::type_list<Sigs...>) {
  return caf::detail::tl_is_distinct<
      caf::detail::type_list<typename atom_of<Sigs>::type...>>::value;
}

template <class... Sigs>
constexpr std::size_t count(caf::detail::type_list<Sigs...>) {
  return sizeof...(Sigs);
}

using whole = managed_allocator_actor::signatures;

static_assert(atoms_distinct(whole{}),
              "an atom of the allocator's interface names more than one request");
// The remote interface keeps the rule: a session's regions, every region (operator), reading and
// setting the quota, a peer's and a tenant's session are requests of their own.
static_assert(atoms_distinct(remote_allocator_actor::signatures{}),
              "an atom of the remote interface names more than one request");
static_assert(count(allocation_actor::signatures{}) + count(placement_actor::signatures{}) +
                      count(inspection_actor::signatures{}) +
                      count(administration_actor::signatures{}) ==
                  count(whole{}),
              "the slices do not add up to the whole interface");
static_assert(std::is_assignable_v<allocation_actor&, const managed_allocator_actor&> &&
                  std::is_assignable_v<placement_actor&, const managed_allocator_actor&> &&
                  std::is_assignable_v<inspection_actor&, const managed_allocator_actor&> &&
                  std::is_assignable_v<administration_actor&, const managed_allocator_actor&>,
              "a handle of the whole interface must narrow to each slice");

struct config : caf::actor_system_config {
  config() { register_types(*this); }
};

TEST(interface, EachSliceOfAnAllocatorHandleServesItsRequests) {
  config cfg;
  caf::actor_system sys{cfg};
  client owner(sys, allocator_config{.backend = {.choice = backend_choice::host}});
  const allocation_actor allocation = owner.handle();
  const placement_actor placement = owner.handle();
  const inspection_actor inspection = owner.handle();
  const administration_actor administration = owner.handle();
  caf::scoped_actor self{sys};
  const auto timeout = std::chrono::seconds(10);

  byte_ref ref;
  self->request(allocation, timeout, allocate_atom_v,
                allocate_request{4096, 1, 1, attach_flag::global, {}, "slice"})
      .receive([&](byte_ref& r) { ref = std::move(r); },
               [](caf::error& e) { FAIL() << caf::to_string(e); });
  ASSERT_TRUE(ref.valid());
  self->request(placement, timeout, advise_atom_v,
                advise_request{{ref}, advice::set_read_mostly, location::host()})
      .receive([](const op_result& r) { EXPECT_EQ(r.ranges, 1u); },
               [](caf::error& e) { FAIL() << caf::to_string(e); });
  self->request(inspection, timeout, attributes_atom_v, ref)
      .receive([](const range_attributes& a) { EXPECT_TRUE(a.read_mostly); },
               [](caf::error& e) { FAIL() << caf::to_string(e); });
  self->request(administration, timeout, quota_atom_v, std::uint64_t{0})
      .receive([](std::uint64_t quota) { EXPECT_GT(quota, 0u); },
               [](caf::error& e) { FAIL() << caf::to_string(e); });
}

}  // namespace
}  // namespace uma
