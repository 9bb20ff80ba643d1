// The CUDA backend against a real device. Every test but the probe test skips with a reason when
// no CUDA device is usable; tests that need two GPUs skip when there is only one.

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <uma/sys/backend.hpp>
#include <uma/sys/cuda_backend.hpp>
#include "tests/support/cuda_kernels.hpp"

namespace uma {

/// Readable locations in gtest failure messages (found by ADL).
void PrintTo(const location& loc, std::ostream* os) {
  *os << to_string(loc);
}

}  // namespace uma

namespace uma::test {

namespace {

constexpr std::size_t mib = std::size_t{1} << 20;

/// A managed allocation made and freed through the backend under test.
class managed_buffer {
 public:
  managed_buffer(backend& owner, std::size_t bytes, attach_flag attach = attach_flag::global)
      : owner_(&owner), bytes_(bytes), ptr_(owner.allocate_managed(bytes, attach)) {}
  managed_buffer(const managed_buffer&) = delete;
  managed_buffer& operator=(const managed_buffer&) = delete;
  ~managed_buffer() { owner_->free_managed(ptr_, bytes_); }

  [[nodiscard]] void* get() const noexcept { return ptr_; }
  [[nodiscard]] float* floats() const noexcept { return static_cast<float*>(ptr_); }
  [[nodiscard]] std::size_t count() const noexcept { return bytes_ / sizeof(float); }
  [[nodiscard]] byte_range range() const noexcept { return {ptr_, bytes_}; }

 private:
  backend* owner_;
  std::size_t bytes_;
  void* ptr_;
};

class gpu_backend : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto probe = probe_cuda();
    if (!probe.usable) {
      GTEST_SKIP() << "no usable CUDA device: " << probe.reason;
    }
    backend_ = make_cuda_backend();
    stream_ = create_stream();
  }

  void TearDown() override { destroy_stream(stream_); }

  [[nodiscard]] stream_view stream() const noexcept { return {stream_}; }
  [[nodiscard]] const device_capabilities& device0() const { return backend_->capabilities(0); }

  [[nodiscard]] std::optional<location> last_prefetch(const byte_range& range) {
    return backend_->attributes(range).last_prefetch_location;
  }

  /// Eight 2 MiB managed buffers, for batch calls.
  [[nodiscard]] std::vector<std::unique_ptr<managed_buffer>> eight_buffers() {
    std::vector<std::unique_ptr<managed_buffer>> buffers;
    for (int i = 0; i < 8; ++i) {
      buffers.push_back(std::make_unique<managed_buffer>(*backend_, 2 * mib));
    }
    return buffers;
  }

  [[nodiscard]] static std::vector<byte_range> ranges_of(
      const std::vector<std::unique_ptr<managed_buffer>>& buffers) {
    std::vector<byte_range> ranges;
    for (const auto& buffer : buffers) {
      ranges.push_back(buffer->range());
    }
    return ranges;
  }

  std::shared_ptr<backend> backend_;
  void* stream_ = nullptr;
};

// --- probing ----------------------------------------------------------------------------------

TEST(cuda_probe, an_unusable_runtime_names_the_reason_and_make_throws_no_device) {
  const auto probe = probe_cuda();
  if (probe.usable) {
    EXPECT_GT(probe.device_count, 0);
    return;
  }
  EXPECT_EQ(probe.device_count, 0);
  EXPECT_FALSE(probe.reason.empty());
  try {
    static_cast<void>(make_cuda_backend());
    ADD_FAILURE() << "make_cuda_backend succeeded although the probe said: " << probe.reason;
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::no_device) << e.what();
  }
}

// --- identity and capabilities ----------------------------------------------------------------

TEST_F(gpu_backend, describes_itself_as_cuda_with_every_device) {
  EXPECT_EQ(backend_->kind(), backend_kind::cuda);
  EXPECT_EQ(backend_->device_count(), probe_cuda().device_count);
  const std::string text = backend_->description();
  EXPECT_EQ(text.rfind("cuda: ", 0), 0u) << text;
  EXPECT_NE(text.find(device0().name), std::string::npos) << text;
}

TEST_F(gpu_backend, caches_capabilities_per_device) {
  for (int ordinal = 0; ordinal < backend_->device_count(); ++ordinal) {
    const auto& caps = backend_->capabilities(ordinal);
    EXPECT_FALSE(caps.name.empty());
    EXPECT_GT(caps.total_memory, 0u);
    EXPECT_TRUE(caps.managed_memory);
    EXPECT_EQ(&backend_->capabilities(ordinal), &caps);
  }
}

TEST_F(gpu_backend, default_quota_is_a_fraction_of_device_memory) {
  const std::size_t quota = backend_->default_quota();
  EXPECT_GT(quota, 0u);
  EXPECT_LT(quota, device0().total_memory);
  EXPECT_EQ(backend_->guaranteed_alignment(), 256u);
}

// --- allocation -------------------------------------------------------------------------------

TEST_F(gpu_backend, kernel_writes_to_managed_memory_are_visible_on_the_host_after_sync) {
  managed_buffer buffer(*backend_, 4 * mib);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.get()) % backend_->guaranteed_alignment(), 0u);
  fill_on_device(buffer.floats(), buffer.count(), 3.0f, stream_);
  add_on_device(buffer.floats(), buffer.count(), 1.5f, stream_);
  stream_synchronize(stream_);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < buffer.count(); ++i) {
    wrong += buffer.floats()[i] != 4.5f ? 1 : 0;
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_DOUBLE_EQ(sum_on_device(buffer.floats(), buffer.count()),
                   4.5 * static_cast<double>(buffer.count()));
}

TEST_F(gpu_backend, an_impossible_allocation_is_out_of_memory_naming_the_size) {
  const std::size_t huge = std::size_t{1} << 60;
  try {
    void* ptr = backend_->allocate_managed(huge, attach_flag::global);
    backend_->free_managed(ptr, huge);
    ADD_FAILURE() << "allocating 1 EiB of managed memory succeeded";
  } catch (const cuda_error& e) {
    EXPECT_EQ(e.code(), errc::out_of_memory) << e.what();
    EXPECT_FALSE(e.sticky());
    EXPECT_NE(std::string(e.what()).find(std::to_string(huge)), std::string::npos) << e.what();
  }
}

// --- prefetch ---------------------------------------------------------------------------------

TEST_F(gpu_backend, a_prefetch_the_runtime_refuses_throws_naming_the_call) {
  managed_buffer buffer(*backend_, mib);
  const auto range = buffer.range();
  const location nowhere[] = {location::device(backend_->device_count() + 7)};
  try {
    backend_->prefetch({&range, 1}, nowhere, stream());
    ADD_FAILURE() << "prefetch to a device that does not exist succeeded";
  } catch (const cuda_error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("cudaMemPrefetchAsync"), std::string::npos) << e.what();
  }
}

TEST_F(gpu_backend, batch_prefetch_broadcasts_one_location_to_every_range) {
  const auto buffers = eight_buffers();
  const auto ranges = ranges_of(buffers);
  const auto before = backend_->counters();
  const location to_device[] = {location::device(0)};
  backend_->prefetch(ranges, to_device, stream());
  stream_synchronize(stream_);

  const auto after = backend_->counters();
  if (device0().batch_api) {
    EXPECT_EQ(after.batch_calls, before.batch_calls + 1);
    EXPECT_EQ(after.prefetch_calls, before.prefetch_calls);
  } else {
    EXPECT_EQ(after.prefetch_calls, before.prefetch_calls + 8);
  }
  for (const auto& range : ranges) {
    EXPECT_EQ(last_prefetch(range), location::device(0));
  }
}

TEST_F(gpu_backend, batch_prefetch_pairs_locations_with_ranges_by_index) {
  const auto buffers = eight_buffers();
  const auto ranges = ranges_of(buffers);
  // Runs of equal locations and single ones, so both index layouts are exercised.
  const std::vector<location> targets = {location::device(0), location::device(0), location::host(),
                                         location::device(0), location::host(),    location::host(),
                                         location::host(),    location::device(0)};
  const auto before = backend_->counters();
  backend_->prefetch(ranges, targets, stream());
  stream_synchronize(stream_);

  if (device0().batch_api) {
    EXPECT_EQ(backend_->counters().batch_calls, before.batch_calls + 1);
  }
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_EQ(last_prefetch(ranges[i]), targets[i]) << "range " << i;
  }
}

TEST_F(gpu_backend, batch_prefetch_on_the_default_stream_uses_single_calls) {
  const auto buffers = eight_buffers();
  const auto ranges = ranges_of(buffers);
  const auto before = backend_->counters();
  const location to_device[] = {location::device(0)};
  backend_->prefetch(ranges, to_device, stream_view{});
  device_synchronize();
  EXPECT_EQ(backend_->counters().prefetch_calls, before.prefetch_calls + 8);
  for (const auto& range : ranges) {
    EXPECT_EQ(last_prefetch(range), location::device(0));
  }
}

TEST_F(gpu_backend, prefetch_to_a_host_numa_node_records_that_node) {
  const int numa = device0().host_numa_id;
  if (numa < 0) {
    GTEST_SKIP() << "device 0 reports no host NUMA node (cudaDevAttrHostNumaId = -1)";
  }
  managed_buffer buffer(*backend_, 8 * mib);
  const auto range = buffer.range();
  const location to_node[] = {location::host_numa(numa)};
  backend_->prefetch({&range, 1}, to_node, stream());
  stream_synchronize(stream_);
  EXPECT_EQ(last_prefetch(range), location::host_numa(numa));
}

TEST_F(gpu_backend, prefetch_to_the_current_host_numa_node_lands_on_the_host) {
  if (device0().host_numa_id < 0) {
    GTEST_SKIP() << "device 0 reports no host NUMA node (cudaDevAttrHostNumaId = -1)";
  }
  managed_buffer buffer(*backend_, 8 * mib);
  const auto range = buffer.range();
  const location to_current[] = {location::host_numa_current()};
  backend_->prefetch({&range, 1}, to_current, stream());
  stream_synchronize(stream_);
  const auto last = last_prefetch(range);
  ASSERT_TRUE(last.has_value());
  EXPECT_TRUE(last->is_host_side()) << to_string(*last);
}

TEST_F(gpu_backend, prefetch_to_a_second_device_records_it) {
  if (backend_->device_count() < 2) {
    GTEST_SKIP() << "needs two CUDA devices, found " << backend_->device_count();
  }
  managed_buffer buffer(*backend_, 8 * mib);
  const auto range = buffer.range();
  const location to_peer[] = {location::device(1)};
  backend_->prefetch({&range, 1}, to_peer, stream());
  stream_synchronize(stream_);
  EXPECT_EQ(last_prefetch(range), location::device(1));
}

// --- discard ----------------------------------------------------------------------------------

TEST_F(gpu_backend, discard_runs_and_the_memory_stays_usable) {
  managed_buffer buffer(*backend_, 8 * mib);
  fill_on_device(buffer.floats(), buffer.count(), 1.0f, stream_);
  const auto range = buffer.range();
  const auto before = backend_->counters();
  backend_->discard({&range, 1}, stream());
  if (device0().batch_api) {
    EXPECT_EQ(backend_->counters().discard_calls, before.discard_calls + 1);
  }
  fill_on_device(buffer.floats(), buffer.count(), 2.0f, stream_);
  stream_synchronize(stream_);
  EXPECT_DOUBLE_EQ(sum_on_device(buffer.floats(), buffer.count()),
                   2.0 * static_cast<double>(buffer.count()));
}

TEST_F(gpu_backend, discard_of_many_ranges_is_one_batch_call) {
  const auto buffers = eight_buffers();
  const auto ranges = ranges_of(buffers);
  const auto before = backend_->counters();
  backend_->discard(ranges, stream());
  stream_synchronize(stream_);
  if (device0().batch_api) {
    EXPECT_EQ(backend_->counters().batch_calls, before.batch_calls + 1);
  }
}

TEST_F(gpu_backend, discard_on_the_default_stream_runs) {
  managed_buffer buffer(*backend_, 8 * mib);
  const auto range = buffer.range();
  backend_->discard({&range, 1}, stream_view{});
  device_synchronize();
  fill_on_device(buffer.floats(), buffer.count(), 5.0f, nullptr);
  EXPECT_DOUBLE_EQ(sum_on_device(buffer.floats(), buffer.count()),
                   5.0 * static_cast<double>(buffer.count()));
}

TEST_F(gpu_backend, discard_prefetch_records_the_prefetch_location) {
  managed_buffer buffer(*backend_, 8 * mib);
  fill_on_device(buffer.floats(), buffer.count(), 1.0f, stream_);
  const auto range = buffer.range();
  const location to_device[] = {location::device(0)};
  backend_->discard_prefetch({&range, 1}, to_device, stream());
  stream_synchronize(stream_);
  EXPECT_EQ(last_prefetch(range), location::device(0));
}

TEST_F(gpu_backend, discard_prefetch_of_many_ranges_pairs_locations) {
  const auto buffers = eight_buffers();
  const auto ranges = ranges_of(buffers);
  std::vector<location> targets;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    targets.push_back(i % 2 == 0 ? location::device(0) : location::host());
  }
  const auto before = backend_->counters();
  backend_->discard_prefetch(ranges, targets, stream());
  stream_synchronize(stream_);
  if (device0().batch_api) {
    EXPECT_EQ(backend_->counters().batch_calls, before.batch_calls + 1);
  }
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_EQ(last_prefetch(ranges[i]), targets[i]) << "range " << i;
  }
}

// --- advice -----------------------------------------------------------------------------------

TEST_F(gpu_backend, accessed_by_a_peer_device_is_listed_sorted) {
  if (backend_->device_count() < 2) {
    GTEST_SKIP() << "needs two CUDA devices, found " << backend_->device_count();
  }
  managed_buffer buffer(*backend_, 4 * mib);
  const auto range = buffer.range();
  backend_->advise(range, advice::set_accessed_by, location::device(1));
  backend_->advise(range, advice::set_accessed_by, location::device(0));
  EXPECT_EQ(backend_->attributes(range).accessed_by,
            (std::vector{location::device(0), location::device(1)}));
  backend_->advise(range, advice::unset_accessed_by, location::device(1));
  EXPECT_EQ(backend_->attributes(range).accessed_by, std::vector{location::device(0)});
}

// --- memory kinds -----------------------------------------------------------------------------

TEST_F(gpu_backend, cuda_malloc_memory_is_cuda_device) {
  void* ptr = alloc_device(mib);
  EXPECT_EQ(backend_->kind_of(ptr), memory_kind::cuda_device);
  free_device(ptr);
}

TEST_F(gpu_backend, cuda_malloc_host_memory_is_pinned_host) {
  void* ptr = alloc_pinned(mib);
  EXPECT_EQ(backend_->kind_of(ptr), memory_kind::pinned_host);
  free_pinned(ptr);
}

TEST_F(gpu_backend, cuda_malloc_async_memory_is_cuda_mempool) {
  if (!device0().memory_pools) {
    GTEST_SKIP() << "device 0 does not support memory pools";
  }
  void* ptr = alloc_pool(mib, stream_);
  EXPECT_EQ(backend_->kind_of(ptr), memory_kind::cuda_mempool);
  free_pool(ptr, stream_);
}

TEST_F(gpu_backend, plain_host_memory_is_host) {
  auto plain = std::make_unique<double[]>(1024);
  EXPECT_EQ(backend_->kind_of(plain.get()), memory_kind::host);
  // The unregistered pointer leaves no error behind for the next runtime call.
  managed_buffer buffer(*backend_, mib);
  EXPECT_EQ(backend_->kind_of(buffer.get()), memory_kind::cuda_managed);
}

// --- streams ----------------------------------------------------------------------------------

TEST_F(gpu_backend, is_capturing_only_during_a_stream_capture) {
  EXPECT_FALSE(backend_->is_capturing(stream()));
  EXPECT_FALSE(backend_->is_capturing(stream_view{}));
  begin_capture(stream_);
  EXPECT_TRUE(backend_->is_capturing(stream()));
  end_capture_and_destroy(stream_);
  EXPECT_FALSE(backend_->is_capturing(stream()));
}

struct host_func_probe {
  const float* data = nullptr;
  bool read_data = false;
  std::atomic<bool> ran{false};
  std::atomic<float> first{0.0f};
};

void record_host_func(void* arg) {
  auto* probe = static_cast<host_func_probe*>(arg);
  if (probe->read_data) {
    probe->first.store(probe->data[0]);
  }
  probe->ran.store(true);
}

TEST_F(gpu_backend, launch_host_func_runs_after_the_work_before_it) {
  managed_buffer buffer(*backend_, 4 * mib);
  host_func_probe probe;
  probe.data = buffer.floats();
  // Reading managed memory while the GPU may be busy needs concurrent managed access.
  probe.read_data = device0().concurrent_managed_access;
  fill_on_device(buffer.floats(), buffer.count(), 7.0f, stream_);
  backend_->launch_host_func(stream(), &record_host_func, &probe);
  stream_synchronize(stream_);
  EXPECT_TRUE(probe.ran.load());
  if (probe.read_data) {
    EXPECT_EQ(probe.first.load(), 7.0f);
  }
}

TEST_F(gpu_backend, synchronize_waits_for_every_device) {
  managed_buffer buffer(*backend_, 4 * mib);
  fill_on_device(buffer.floats(), buffer.count(), 9.0f, stream_);
  backend_->synchronize();
  EXPECT_EQ(buffer.floats()[buffer.count() - 1], 9.0f);
}

}  // namespace

}  // namespace uma::test
