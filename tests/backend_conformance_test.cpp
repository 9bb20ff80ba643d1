// The contract of sys/backend.hpp, checked once per backend (RMM's conformance-suite pattern:
// `TestWithParam` over factories). Parameters: the host backend, the CUDA backend, and the
// fault-injecting backend in pass-through mode over each. A backend that cannot be made here (no
// usable CUDA device) skips every test in SetUp, naming the reason.
//
// What only one backend does (host: page quarantine, per-page state, NUMA checks; CUDA: kernels,
// pool memory, streams, batch entry points, several devices) stays in host_backend_test.cpp and
// gpu_backend_test.cpp.

#include <gtest/gtest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <uma/sys/backend.hpp>
#include <uma/sys/cuda_backend.hpp>
#include <uma/sys/error.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include <uma/sys/host_backend.hpp>

namespace uma {

/// Readable locations in gtest failure messages (found by ADL).
inline void PrintTo(const location& loc, std::ostream* os) {
  *os << to_string(loc);
}

}  // namespace uma

namespace uma::test {

namespace {

constexpr std::size_t kib = 1024;

/// A backend made for one test, or the reason it cannot be made here.
struct made_backend {
  std::shared_ptr<backend> instance;
  std::string skip_reason;
};

/// One parameter of the suite.
struct backend_factory {
  std::string name;
  std::function<made_backend()> make;
  backend_kind kind;
  memory_kind managed_kind;  ///< what kind_of says about a managed allocation
  memory_kind pinned_kind;   ///< ... about the host tier's memory
  memory_kind device_kind;   ///< ... about device memory (a tier)
};

made_backend make_host() {
  return {std::make_shared<host_backend>(), {}};
}

made_backend make_cuda() {
  const auto probe = probe_cuda();
  if (!probe.usable)
    return {nullptr, "no usable CUDA device: " + probe.reason};
  return {make_cuda_backend(), {}};
}

/// `inner` behind a fault-injecting backend with no fault armed.
std::function<made_backend()> pass_through(std::function<made_backend()> inner) {
  return [inner = std::move(inner)] {
    auto made = inner();
    if (made.instance)
      made.instance = std::make_shared<fault_injecting_backend>(made.instance);
    return made;
  };
}

void PrintTo(const backend_factory& f, std::ostream* os) {
  *os << f.name;
}

/// An allocation made through the backend under test and freed by it.
class managed_block {
 public:
  managed_block(backend& owner, std::size_t bytes, attach_flag attach = attach_flag::global)
      : owner_(&owner), bytes_(bytes), ptr_(owner.allocate_managed(bytes, attach)) {}
  managed_block(const managed_block&) = delete;
  managed_block& operator=(const managed_block&) = delete;
  ~managed_block() { owner_->free_managed(ptr_, bytes_); }

  [[nodiscard]] void* get() const noexcept { return ptr_; }
  [[nodiscard]] byte_range range() const noexcept { return {ptr_, bytes_}; }

 private:
  backend* owner_;
  std::size_t bytes_;
  void* ptr_;
};

/// The errc of what `fn` throws; nullopt (and a test failure) when it throws nothing.
template <class Fn>
std::optional<errc> error_of(Fn&& fn) {
  try {
    fn();
  } catch (const error& e) {
    return e.code();
  }
  ADD_FAILURE() << "expected a uma::error, nothing was thrown";
  return std::nullopt;
}

class backend_conformance : public ::testing::TestWithParam<backend_factory> {
 protected:
  void SetUp() override {
    auto made = GetParam().make();
    if (!made.instance) {
      GTEST_SKIP() << made.skip_reason;
    }
    backend_ = std::move(made.instance);
  }

  void TearDown() override {
    if (backend_) {
      EXPECT_EQ(backend_->counters().live_allocations, 0u) << "a test leaked an allocation";
    }
  }

  /// Where a prefetch or preferred-location advice goes: GPU 0 where there is one, else host.
  [[nodiscard]] location target() const {
    return backend_->device_count() > 0 ? location::device(0) : location::host();
  }

  [[nodiscard]] std::optional<location> last_prefetch(const byte_range& range) {
    return backend_->attributes(range).last_prefetch_location;
  }

  std::shared_ptr<backend> backend_;
};

// --- identity ---------------------------------------------------------------------------------

TEST_P(backend_conformance, reports_its_kind_and_a_description) {
  EXPECT_EQ(backend_->kind(), GetParam().kind);
  EXPECT_FALSE(backend_->description().empty());
  EXPECT_GE(backend_->device_count(), 0);
  EXPECT_GE(backend_->host_numa_nodes(), 1);
}

TEST_P(backend_conformance, capabilities_of_every_device_name_their_ordinal) {
  for (int ordinal = 0; ordinal < backend_->device_count(); ++ordinal)
    EXPECT_EQ(backend_->capabilities(ordinal).ordinal, ordinal);
}

TEST_P(backend_conformance, capabilities_of_a_bad_ordinal_are_invalid_argument) {
  EXPECT_EQ(error_of([&] { (void)backend_->capabilities(backend_->device_count()); }),
            errc::invalid_argument);
  EXPECT_EQ(error_of([&] { (void)backend_->capabilities(-1); }), errc::invalid_argument);
}

TEST_P(backend_conformance, default_quota_is_positive_and_stable) {
  const std::size_t quota = backend_->default_quota();
  EXPECT_GT(quota, 0u);
  EXPECT_EQ(backend_->default_quota(), quota);
}

// --- allocation -------------------------------------------------------------------------------

TEST_P(backend_conformance, guaranteed_alignment_is_a_power_of_two_every_allocation_has) {
  const std::size_t alignment = backend_->guaranteed_alignment();
  EXPECT_TRUE(std::has_single_bit(alignment)) << alignment;
  EXPECT_GE(alignment, alignof(std::max_align_t));
  for (const std::size_t bytes : {std::size_t{1}, std::size_t{100}, 4 * kib + 1, 64 * kib}) {
    managed_block block(*backend_, bytes);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(block.get()) % alignment, 0u) << bytes << " bytes";
  }
}

TEST_P(backend_conformance, memory_of_either_attach_flag_is_writable_and_readable_by_the_host) {
  for (const auto attach : {attach_flag::global, attach_flag::host}) {
    managed_block block(*backend_, 64 * kib, attach);
    std::memset(block.get(), 0x5a, 64 * kib);
    backend_->synchronize();
    const auto* bytes = static_cast<const unsigned char*>(block.get());
    EXPECT_EQ(bytes[0], 0x5a);
    EXPECT_EQ(bytes[64 * kib - 1], 0x5a);
  }
}

TEST_P(backend_conformance, allocations_and_frees_are_counted_exactly) {
  const auto before = backend_->counters();
  void* a = backend_->allocate_managed(4 * kib, attach_flag::global);
  void* b = backend_->allocate_managed(12 * kib, attach_flag::host);
  auto now = backend_->counters();
  EXPECT_EQ(now.allocations, before.allocations + 2);
  EXPECT_EQ(now.live_allocations, before.live_allocations + 2);
  EXPECT_EQ(now.live_bytes, before.live_bytes + 16 * kib);
  backend_->free_managed(a, 4 * kib);
  backend_->free_managed(b, 12 * kib);
  now = backend_->counters();
  EXPECT_EQ(now.frees, before.frees + 2);
  EXPECT_EQ(now.live_allocations, before.live_allocations);
  EXPECT_EQ(now.live_bytes, before.live_bytes);
  EXPECT_EQ(now.bad_frees, before.bad_frees);
}

TEST_P(backend_conformance, freeing_a_foreign_pointer_is_counted_as_bad_and_leaves_it_alone) {
  auto foreign = std::make_unique<int>(42);
  const auto before = backend_->counters();
  backend_->free_managed(foreign.get(), sizeof(int));
  const auto after = backend_->counters();
  EXPECT_EQ(after.bad_frees, before.bad_frees + 1);
  EXPECT_EQ(after.frees, before.frees);
  EXPECT_EQ(*foreign, 42);
}

TEST_P(backend_conformance, a_zero_byte_allocation_is_invalid_argument) {
  EXPECT_EQ(error_of([&] { (void)backend_->allocate_managed(0, attach_flag::global); }),
            errc::invalid_argument);
  EXPECT_EQ(backend_->counters().live_allocations, 0u);
}

TEST_P(backend_conformance, an_impossible_allocation_is_out_of_memory) {
  const std::size_t huge = std::size_t{1} << 60;
  EXPECT_EQ(error_of([&] {
              void* p = backend_->allocate_managed(huge, attach_flag::global);
              backend_->free_managed(p, huge);
            }),
            errc::out_of_memory);
  EXPECT_EQ(backend_->counters().live_allocations, 0u);
}

// --- prefetch and discard ---------------------------------------------------------------------

TEST_P(backend_conformance, a_fresh_range_has_no_advice_and_no_prefetch) {
  managed_block block(*backend_, 64 * kib);
  EXPECT_EQ(backend_->attributes(block.range()), range_attributes{});
}

TEST_P(backend_conformance, single_prefetch_is_read_back_as_the_last_prefetch_location) {
  managed_block block(*backend_, 64 * kib);
  const auto range = block.range();
  const location to[] = {target()};
  backend_->prefetch({&range, 1}, to, {});
  backend_->synchronize();
  EXPECT_EQ(last_prefetch(range), target());
  const location home[] = {location::host()};
  backend_->prefetch({&range, 1}, home, {});
  backend_->synchronize();
  EXPECT_EQ(last_prefetch(range), location::host());
}

TEST_P(backend_conformance, batch_prefetch_broadcasts_one_location_to_every_range) {
  managed_block a(*backend_, 64 * kib), b(*backend_, 64 * kib), c(*backend_, 64 * kib);
  const byte_range ranges[] = {a.range(), b.range(), c.range()};
  const location to[] = {target()};
  backend_->prefetch(ranges, to, {});
  backend_->synchronize();
  for (const auto& r : ranges)
    EXPECT_EQ(last_prefetch(r), target());
}

TEST_P(backend_conformance, batch_prefetch_pairs_locations_with_ranges_by_index) {
  managed_block a(*backend_, 64 * kib), b(*backend_, 64 * kib);
  const byte_range ranges[] = {a.range(), b.range()};
  const location to[] = {target(), location::host()};
  backend_->prefetch(ranges, to, {});
  backend_->synchronize();
  EXPECT_EQ(last_prefetch(ranges[0]), target());
  EXPECT_EQ(last_prefetch(ranges[1]), location::host());
}

TEST_P(backend_conformance, prefetch_with_unpaired_locations_is_invalid_argument) {
  managed_block a(*backend_, 64 * kib), b(*backend_, 64 * kib);
  const byte_range ranges[] = {a.range(), b.range()};
  const location three[] = {location::host(), location::host(), location::host()};
  EXPECT_EQ(error_of([&] { backend_->prefetch(ranges, three, {}); }), errc::invalid_argument);
}

TEST_P(backend_conformance, discard_of_one_and_of_many_ranges_leaves_the_memory_usable) {
  managed_block a(*backend_, 64 * kib), b(*backend_, 64 * kib);
  const byte_range ranges[] = {a.range(), b.range()};
  backend_->discard({ranges, 1}, {});
  backend_->discard(ranges, {});
  backend_->synchronize();
  std::memset(a.get(), 1, 64 * kib);
  std::memset(b.get(), 2, 64 * kib);
  EXPECT_EQ(static_cast<const unsigned char*>(b.get())[64 * kib - 1], 2);
}

TEST_P(backend_conformance, discard_prefetch_is_read_back_as_the_last_prefetch_location) {
  managed_block a(*backend_, 64 * kib), b(*backend_, 64 * kib);
  const byte_range ranges[] = {a.range(), b.range()};
  const location to[] = {target()};
  backend_->discard_prefetch({ranges, 1}, to, {});
  backend_->synchronize();
  EXPECT_EQ(last_prefetch(ranges[0]), target());
  const location paired[] = {location::host(), target()};
  backend_->discard_prefetch(ranges, paired, {});
  backend_->synchronize();
  EXPECT_EQ(last_prefetch(ranges[0]), location::host());
  EXPECT_EQ(last_prefetch(ranges[1]), target());
}

// --- advice -----------------------------------------------------------------------------------

TEST_P(backend_conformance, read_mostly_advice_is_read_back) {
  managed_block block(*backend_, 64 * kib);
  const auto range = block.range();
  backend_->advise(range, advice::set_read_mostly, location::host());
  EXPECT_TRUE(backend_->attributes(range).read_mostly);
  backend_->advise(range, advice::unset_read_mostly, location::host());
  EXPECT_FALSE(backend_->attributes(range).read_mostly);
}

TEST_P(backend_conformance, preferred_location_advice_is_read_back) {
  managed_block block(*backend_, 64 * kib);
  const auto range = block.range();
  const auto before = backend_->counters();
  backend_->advise(range, advice::set_preferred_location, target());
  EXPECT_EQ(backend_->attributes(range).preferred_location, target());
  backend_->advise(range, advice::set_preferred_location, location::host());
  EXPECT_EQ(backend_->attributes(range).preferred_location, location::host());
  backend_->advise(range, advice::unset_preferred_location, location::host());
  EXPECT_EQ(backend_->attributes(range).preferred_location, std::nullopt);
  EXPECT_EQ(backend_->counters().advise_calls, before.advise_calls + 3);
}

TEST_P(backend_conformance, accessed_by_a_device_is_read_back) {
  if (backend_->device_count() == 0) {
    GTEST_SKIP() << "accessed-by names a device; this backend has none";
  }
  managed_block block(*backend_, 64 * kib);
  const auto range = block.range();
  backend_->advise(range, advice::set_accessed_by, location::device(0));
  EXPECT_EQ(backend_->attributes(range).accessed_by, std::vector{location::device(0)});
  backend_->advise(range, advice::unset_accessed_by, location::device(0));
  EXPECT_TRUE(backend_->attributes(range).accessed_by.empty());
}

TEST_P(backend_conformance, advice_and_prefetch_are_read_back_together) {
  managed_block block(*backend_, 64 * kib);
  const auto range = block.range();
  backend_->advise(range, advice::set_read_mostly, location::host());
  backend_->advise(range, advice::set_preferred_location, location::host());
  const location to[] = {target()};
  backend_->prefetch({&range, 1}, to, {});
  backend_->synchronize();
  const auto a = backend_->attributes(range);
  EXPECT_TRUE(a.read_mostly);
  EXPECT_EQ(a.preferred_location, location::host());
  EXPECT_EQ(a.last_prefetch_location, target());
}

// --- tiers and copies -------------------------------------------------------------------------

TEST_P(backend_conformance, tier_allocations_are_counted_and_freed_as_their_kind) {
  const auto before = backend_->counters();
  void* pinned = backend_->allocate_tier(memory_kind::pinned_host, 64 * kib, 0);
  std::memset(pinned, 0x3c, 64 * kib);  // the host writes the host tier directly
  EXPECT_EQ(backend_->kind_of(pinned), GetParam().pinned_kind);
  auto now = backend_->counters();
  EXPECT_EQ(now.tier_allocations, before.tier_allocations + 1);
  EXPECT_EQ(now.live_allocations, before.live_allocations + 1);
  EXPECT_EQ(now.allocations, before.allocations);  // not managed memory
  if (backend_->device_count() > 0) {
    void* device = backend_->allocate_tier(memory_kind::cuda_device, 32 * kib, 0);
    EXPECT_EQ(backend_->kind_of(device), GetParam().device_kind);
    backend_->free_tier(memory_kind::cuda_device, device, 32 * kib, 0);
  }
  backend_->free_tier(memory_kind::pinned_host, pinned, 64 * kib, 0);
  now = backend_->counters();
  EXPECT_EQ(now.tier_frees - before.tier_frees, now.tier_allocations - before.tier_allocations);
  EXPECT_EQ(now.live_allocations, before.live_allocations);
  EXPECT_EQ(now.live_bytes, before.live_bytes);
  EXPECT_EQ(now.bad_frees, before.bad_frees);
}

TEST_P(backend_conformance, only_the_two_tiers_and_a_device_it_has_are_allocated_as_tiers) {
  EXPECT_EQ(error_of([&] { (void)backend_->allocate_tier(memory_kind::cuda_managed, kib, 0); }),
            errc::invalid_argument);
  EXPECT_EQ(error_of([&] { (void)backend_->allocate_tier(memory_kind::pinned_host, 0, 0); }),
            errc::invalid_argument);
  EXPECT_EQ(error_of([&] {
              (void)backend_->allocate_tier(memory_kind::cuda_device, kib,
                                            backend_->device_count());
            }),
            errc::invalid_argument);
  EXPECT_EQ(backend_->counters().tier_allocations, 0u);
}

TEST_P(backend_conformance, freeing_a_tier_as_another_kind_is_bad_and_leaves_it_alone) {
  auto* pinned =
      static_cast<unsigned char*>(backend_->allocate_tier(memory_kind::pinned_host, 8 * kib, 0));
  pinned[0] = 7;
  const auto before = backend_->counters();
  backend_->free_tier(memory_kind::cuda_device, pinned, 8 * kib, 0);
  backend_->free_managed(pinned, 8 * kib);
  EXPECT_EQ(backend_->counters().bad_frees, before.bad_frees + 2);
  EXPECT_EQ(pinned[0], 7);  // still there
  backend_->free_tier(memory_kind::pinned_host, pinned, 8 * kib, 0);
  EXPECT_EQ(backend_->counters().tier_frees, before.tier_frees + 1);
}

TEST_P(backend_conformance, copies_through_the_tiers_move_exact_bytes_in_stream_order) {
  constexpr std::size_t bytes = 256 * kib;
  auto* from =
      static_cast<unsigned char*>(backend_->allocate_tier(memory_kind::pinned_host, bytes, 0));
  auto* back =
      static_cast<unsigned char*>(backend_->allocate_tier(memory_kind::pinned_host, bytes, 0));
  for (std::size_t i = 0; i < bytes; ++i)
    from[i] = static_cast<unsigned char>(i * 31 + 5);
  std::memset(back, 0, bytes);
  const bool device = backend_->device_count() > 0;
  void* middle = device ? backend_->allocate_tier(memory_kind::cuda_device, bytes, 0)
                        : backend_->allocate_tier(memory_kind::pinned_host, bytes, 0);
  const auto before = backend_->counters();
  backend_->copy(middle, from, bytes, stream_view{});
  backend_->copy(back, middle, bytes, stream_view{});
  backend_->wait_stream(stream_view{});
  EXPECT_EQ(std::memcmp(from, back, bytes), 0);
  const auto now = backend_->counters();
  EXPECT_EQ(now.copies, before.copies + 2);
  EXPECT_EQ(now.copy_bytes, before.copy_bytes + 2 * bytes);
  backend_->free_tier(device ? memory_kind::cuda_device : memory_kind::pinned_host, middle, bytes,
                      0);
  backend_->free_tier(memory_kind::pinned_host, back, bytes, 0);
  backend_->free_tier(memory_kind::pinned_host, from, bytes, 0);
}

// --- pointers and streams ---------------------------------------------------------------------

TEST_P(backend_conformance, a_managed_pointer_has_the_backends_managed_kind) {
  managed_block block(*backend_, 64 * kib);
  EXPECT_EQ(backend_->kind_of(block.get()), GetParam().managed_kind);
  EXPECT_EQ(backend_->kind_of(static_cast<const char*>(block.get()) + 100),
            GetParam().managed_kind);
}

TEST_P(backend_conformance, a_stack_pointer_is_host_memory_and_null_is_unknown) {
  int local = 0;
  EXPECT_EQ(backend_->kind_of(&local), memory_kind::host);
  EXPECT_EQ(backend_->kind_of(nullptr), memory_kind::unknown);
}

TEST_P(backend_conformance, the_default_stream_is_not_capturing) {
  EXPECT_FALSE(backend_->is_capturing(stream_view{}));
}

TEST_P(backend_conformance, a_host_function_on_the_default_stream_has_run_once_waited_for) {
  int ran = 0;
  backend_->launch_host_func(
      stream_view{}, [](void* arg) { ++*static_cast<int*>(arg); }, &ran);
  backend_->wait_stream(stream_view{});
  EXPECT_EQ(ran, 1);
}

TEST_P(backend_conformance, synchronize_returns_with_nothing_queued) {
  backend_->prepare_thread();
  backend_->synchronize();
  SUCCEED();
}

const backend_factory factories[] = {
    {"host", make_host, backend_kind::host, memory_kind::host, memory_kind::host,
     memory_kind::host},
    {"cuda", make_cuda, backend_kind::cuda, memory_kind::cuda_managed, memory_kind::pinned_host,
     memory_kind::cuda_device},
    {"faults_over_host", pass_through(make_host), backend_kind::host, memory_kind::host,
     memory_kind::host, memory_kind::host},
    {"faults_over_cuda", pass_through(make_cuda), backend_kind::cuda, memory_kind::cuda_managed,
     memory_kind::pinned_host, memory_kind::cuda_device},
};

INSTANTIATE_TEST_SUITE_P(backends, backend_conformance, ::testing::ValuesIn(factories),
                         [](const ::testing::TestParamInfo<backend_factory>& info) {
                           return info.param.name;
                         });

}  // namespace

}  // namespace uma::test
