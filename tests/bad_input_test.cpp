// The bad-input catalogue: every invalid request uma knows of, one row each, with the exact
// error code and the words its message must contain. A row that needs a CUDA device (allocation
// during a graph capture) skips on the host with a reason; tests/gpu_allocator_test.cpp covers it
// on CUDA.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/scoped_actor.hpp>

#include "support/reliability_fixture.hpp"

namespace uma {
namespace {

constexpr std::size_t max_size = std::numeric_limits<std::size_t>::max();

/// The fixture, opened up to the catalogue's rows.
class bad_input_env : public test::reliability_fixture {
 public:
  using test::reliability_fixture::host_config;
  using test::reliability_fixture::make_client;
  using test::reliability_fixture::sys_;
  using test::reliability_fixture::uma_;

  /// Sends an allocate request as is (the facade would fill in element size and alignment).
  byte_ref raw_allocate(allocate_request r) {
    caf::scoped_actor self{sys_};
    std::optional<byte_ref> out;
    caf::error err;
    self->request(uma_->handle(), std::chrono::seconds(30), allocate_atom_v, std::move(r))
        .receive([&](byte_ref& ref) { out = std::move(ref); },
                 [&](caf::error& e) { err = std::move(e); });
    if (err)
      throw to_uma_error(err);
    return std::move(*out);
  }
  /// A ref of a live allocator other than `uma_`.
  byte_ref foreign_ref() {
    other_ = make_client(host_config());
    return client::erase(other_->allocate<float>(256));
  }
  /// A ref whose allocator has stopped.
  byte_ref inert_ref() {
    auto c = make_client(host_config());
    auto ref = client::erase(c->allocate<float>(256));
    c->stop();
    return ref;
  }
  byte_ref fresh(std::size_t floats = 1024) { return client::erase(uma_->allocate<float>(floats)); }

 private:
  std::unique_ptr<client> other_;
};

struct bad_input {
  const char* name;
  errc code;
  const char* words;  ///< the message must contain these
  std::function<void(bad_input_env&)> request;
  const char* gpu_only = nullptr;  ///< why the row needs a CUDA device, if it does
};

// clang-format off
const std::vector<bad_input>& catalogue() {
  using e = bad_input_env;
  static const std::vector<bad_input> rows = {
    // -- allocate ----------------------------------------------------------------------------
    {"CountTimesElementSizeOverflows", errc::overflow, "elements of 8 bytes overflow size_t",
     [](e& x) { (void)x.uma_->allocate<std::uint64_t>(max_size / 4); }},
    {"SizePlusAlignmentPaddingOverflows", errc::overflow, "of alignment padding overflow size_t",
     [](e& x) { (void)x.raw_allocate({max_size - 100, 1, std::size_t{1} << 20}); }},
    {"ZeroCount", errc::invalid_argument, "zero-size request (0 elements of 4 bytes)",
     [](e& x) { (void)x.uma_->allocate<float>(0); }},
    {"ZeroElementSize", errc::invalid_argument, "zero-size request (16 elements of 0 bytes)",
     [](e& x) { (void)x.raw_allocate({16, 0}); }},
    {"AlignmentNotAPowerOfTwo", errc::invalid_argument, "alignment 24 is not a power of two",
     [](e& x) { (void)x.raw_allocate({16, 4, 24}); }},
    {"QuotaBreach", errc::quota_exceeded, "over the quota of 1048576 bytes",
     [](e& x) {
       auto small = x.make_client({.memory = {.quota_bytes = 1 << 20}});
       auto held = small->allocate<std::byte>(768 << 10);
       (void)small->allocate<std::byte>(512 << 10);
     }},
    {"StreamOnTheHostBackend", errc::invalid_argument, "host backend has no CUDA streams",
     [](e& x) { (void)x.uma_->allocate<float>(16, {.stream = {reinterpret_cast<void*>(0x10)}}); }},
    {"AllocationDuringCapture", errc::capture_in_progress, "is capturing a graph",
     [](e&) {},
     "a stream capture needs a CUDA device; gpu_allocator.AllocationDuringAStreamCaptureIsRefused "
     "(tests/gpu_allocator_test.cpp, label gpu) covers this row on CUDA"},
    // -- locations -----------------------------------------------------------------------------
    {"PrefetchToAMissingDevice", errc::invalid_argument,
     "prefetch to device 1 is not allowed: the host backend has 1 emulated device(s)",
     [](e& x) { x.uma_->prefetch({x.fresh()}, {location::device(1)}); }},
    {"PrefetchToANegativeDevice", errc::invalid_argument, "device -1 is not allowed",
     [](e& x) { x.uma_->prefetch({x.fresh()}, {location::device(-1)}); }},
    {"PrefetchToAMissingNumaNode", errc::invalid_argument, "host numa 4096 is not allowed: the host has",
     [](e& x) { x.uma_->prefetch({x.fresh()}, {location::host_numa(4096)}); }},
    {"PreferredLocationOnAMissingDevice", errc::invalid_argument,
     "preferred location to device 3 is not allowed",
     [](e& x) { x.uma_->advise({x.fresh()}, advice::set_preferred_location, location::device(3)); }},
    {"AccessedByTheHost", errc::invalid_argument, "accessed_by takes a device only",
     [](e& x) { x.uma_->advise({x.fresh()}, advice::set_accessed_by, location::host()); }},
    {"AccessedByAHostNumaNode", errc::invalid_argument, "accessed_by takes a device only",
     [](e& x) { x.uma_->advise({x.fresh()}, advice::set_accessed_by, location::host_numa(0)); }},
    {"UnsetAccessedByTheCurrentNumaNode", errc::invalid_argument, "accessed_by takes a device only",
     [](e& x) {
       x.uma_->advise({x.fresh()}, advice::unset_accessed_by, location::host_numa_current());
     }},
    {"CanAccessFromAHostNumaNode", errc::invalid_argument,
     "can_access takes a device or host, not a NUMA node",
     [](e& x) { (void)x.uma_->can_access(location::host_numa(0), x.fresh()); }},
    {"CanAccessFromAMissingDevice", errc::invalid_argument,
     "the host backend has 1 emulated device(s)",
     [](e& x) { (void)x.uma_->can_access(location::device(1), x.fresh()); }},
    // -- refs ------------------------------------------------------------------------------------
    {"RefOfAnotherAllocator", errc::invalid_argument, "belongs to another allocator",
     [](e& x) { x.uma_->prefetch({x.foreign_ref()}, {location::host()}); }},
    {"InertRefInPrefetch", errc::allocator_stopped, "is inert: its allocator has stopped",
     [](e& x) { x.uma_->prefetch({x.fresh(), x.inert_ref()}, {location::host()}); }},
    {"InertRefInAdvise", errc::allocator_stopped, "ref #0 (region 1, generation 1) is inert",
     [](e& x) { x.uma_->advise({x.inert_ref()}, advice::set_read_mostly); }},
    {"InertRefInAttributes", errc::allocator_stopped, "attributes: ref #0",
     [](e& x) { (void)x.uma_->attributes(x.inert_ref()); }},
    {"EmptyRefInABatch", errc::invalid_argument, "discard: ref #1 is empty",
     [](e& x) { x.uma_->discard({x.fresh(), byte_ref{}}); }},
    {"NoRefsAtAll", errc::invalid_argument, "advise: no refs given",
     [](e& x) { x.uma_->advise(std::vector<byte_ref>{}, advice::set_read_mostly); }},
    {"MismatchedBatchLengths", errc::invalid_argument, "prefetch: 3 refs but 2 locations",
     [](e& x) {
       x.uma_->prefetch({x.fresh(), x.fresh(), x.fresh()}, {location::host(), location::host()});
     }},
    {"BatchWithoutLocations", errc::invalid_argument, "discard_prefetch: 2 refs but 0 locations",
     [](e& x) { x.uma_->discard_prefetch({x.fresh(), x.fresh()}, {}); }},
    {"DuplicateRefsInABatch", errc::invalid_argument, "appears twice",
     [](e& x) {
       auto r = x.fresh();
       x.uma_->prefetch({r, r}, {location::host()});
     }},
    {"OverlappingViewsInABatch", errc::invalid_argument,
     "appears twice (overlapping ranges at byte offsets 0 and 400)",
     [](e& x) {
       auto r = x.fresh();
       x.uma_->discard({r.subview(0, 2048), r.subview(400, 100)});
     }},
    {"StreamOnTheHostBackendInAPrefetch", errc::invalid_argument,
     "prefetch: stream 0x20 given, but the host backend has no CUDA streams",
     [](e& x) { x.uma_->prefetch({x.fresh()}, {location::host()}, {reinterpret_cast<void*>(0x20)}); }},
    // -- handles -------------------------------------------------------------------------------
    {"PinAnEmptyRef", errc::invalid_argument, "pin: the ref is empty",
     [](e&) { (void)ManagedRef<float>{}.pin(); }},
    {"PinAnInertRef", errc::allocator_stopped, "is inert: its allocator has stopped",
     [](e& x) { (void)x.inert_ref().pin(); }},
    {"SubviewPastTheEnd", errc::invalid_argument, "subview [1000, +25) does not fit in 1024 elements",
     [](e& x) { (void)x.uma_->allocate<float>(1024).subview(1000, 25); }},
    {"SubviewWithAnOverflowingCount", errc::invalid_argument, "does not fit in 1024 elements",
     [](e& x) { (void)x.uma_->allocate<float>(1024).subview(1, max_size); }},
    {"ViewAsAnIncompatibleType", errc::invalid_argument, "10 bytes at offset 0 cannot be viewed",
     [](e& x) { (void)x.uma_->allocate<std::byte>(10).as<std::uint32_t>(); }},
    {"MisalignedView", errc::invalid_argument, "at offset 2 cannot be viewed",
     [](e& x) { (void)x.uma_->allocate<std::byte>(64).subview(2, 8).as<std::uint32_t>(); }},
    // -- the allocator itself ------------------------------------------------------------------
    {"RequestToAStoppedAllocator", errc::allocator_stopped, "went down before it replied",
     [](e& x) {
       auto handle = x.uma_->handle();
       x.uma_->stop();
       (void)client(x.sys_, handle).stats();
     }},
  };
  return rows;
}
// clang-format on

class bad_inputs : public bad_input_env, public ::testing::WithParamInterface<bad_input> {};

TEST_P(bad_inputs, AreRefusedWithTheExactCodeAndAClearMessage) {
  const auto& row = GetParam();
  if (row.gpu_only)
    GTEST_SKIP() << "needs a CUDA device: " << row.gpu_only;
  UMA_EXPECT_ERROR(row.request(*this), row.code, row.words);
  // A refused request leaves nothing behind (the quota row's allocator is its own). Its refs
  // die with its message on the allocator's thread after the reply went out, so their release
  // can trail a flush sent at once; the allocator drops that message before it takes the next
  // one, so one round trip first queues the release ahead of the flush.
  if (uma_->handle())
    static_cast<void>(uma_->stats());
  EXPECT_EQ(uma_->handle() ? uma_->flush().live_regions : 0u, 0u);
}

INSTANTIATE_TEST_SUITE_P(catalogue, bad_inputs, ::testing::ValuesIn(catalogue()),
                         [](const ::testing::TestParamInfo<bad_input>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace uma
