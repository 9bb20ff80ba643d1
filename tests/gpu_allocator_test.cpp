// Allocator behaviour on the CUDA backend. Labelled `gpu`; every test skips with a reason when no
// CUDA device is usable (CI has none).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/sys/cuda_backend.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include "support/actor_fixture.hpp"
#include "support/cuda_kernels.hpp"
#include "support/gpu_fixture.hpp"
#include "support/held_calls.hpp"

namespace uma {
namespace {

class gpu_allocator : public test::gpu_fixture {};

/// A host callback that holds its stream until the test opens the gate.
struct gate {
  std::atomic<bool> open{false};
  static void wait(void* self) {
    auto* g = static_cast<gate*>(self);
    while (!g->open.load())
      std::this_thread::yield();
  }
};

TEST_F(gpu_allocator, ReportsTheCudaBackend) {
  EXPECT_EQ(gpu_->stats().backend, "cuda");
  EXPECT_GE(cuda_->device_count(), 1);
}

TEST_F(gpu_allocator, KernelWritesThroughARefAreVisibleOnTheHostAfterSync) {
  auto ref = gpu_->allocate<float>(1 << 20);
  gpu_->prefetch(ref, location::device(0), {}, completion::complete);
  test::fill_on_device(ref.data(), ref.size(), 3.0f, nullptr);
  test::device_synchronize();
  auto pin = ref.pin();
  EXPECT_EQ(pin[0], 3.0f);
  EXPECT_EQ(pin[ref.size() - 1], 3.0f);
}

TEST_F(gpu_allocator, PrefetchThroughTheActorChangesTheLastPrefetchLocation) {
  auto ref = gpu_->allocate<float>(1 << 20);
  gpu_->prefetch(ref, location::device(0), {}, completion::complete);
  EXPECT_EQ(gpu_->attributes(ref).last_prefetch_location, location::device(0));
  gpu_->prefetch(ref, location::host(), {}, completion::complete);
  EXPECT_EQ(gpu_->attributes(ref).last_prefetch_location, location::host());
}

TEST_F(gpu_allocator, AdviceRoundTripsThroughCudaMemRangeGetAttribute) {
  auto ref = gpu_->allocate<float>(1 << 20);
  gpu_->advise(ref, advice::set_read_mostly);
  gpu_->advise(ref, advice::set_preferred_location, location::device(0));
  gpu_->advise(ref, advice::set_accessed_by, location::device(0));
  auto a = gpu_->attributes(ref);
  EXPECT_TRUE(a.read_mostly);
  EXPECT_EQ(a.preferred_location, location::device(0));
  EXPECT_EQ(a.accessed_by, std::vector<location>{location::device(0)});
  gpu_->advise(ref, advice::unset_accessed_by, location::device(0));
  gpu_->advise(ref, advice::unset_preferred_location);
  gpu_->advise(ref, advice::unset_read_mostly);
  EXPECT_EQ(gpu_->attributes(ref),
            range_attributes{.last_prefetch_location = a.last_prefetch_location});
}

TEST_F(gpu_allocator, BatchPrefetchOfManyRefsUsesTheBatchEntryPoint) {
  std::vector<byte_ref> refs;
  for (int i = 0; i < 16; ++i)
    refs.push_back(client::erase(gpu_->allocate<float>(16384)));
  void* stream = test::create_stream();
  const auto before = cuda_->counters();
  gpu_->prefetch(refs, {location::device(0)}, {stream}, completion::complete);
  const auto after = cuda_->counters();
  if (cuda_->capabilities(0).batch_api)
    EXPECT_EQ(after.batch_calls, before.batch_calls + 1);
  else
    EXPECT_EQ(after.prefetch_calls, before.prefetch_calls + 16);
  for (const auto& r : refs)
    EXPECT_EQ(gpu_->attributes(r).last_prefetch_location, location::device(0));
  test::destroy_stream(stream);
}

TEST_F(gpu_allocator, BatchPrefetchOnTheDefaultStreamLoopsOverSingleCalls) {
  // The batch entry points refuse the legacy default stream.
  std::vector<byte_ref> refs;
  for (int i = 0; i < 4; ++i)
    refs.push_back(client::erase(gpu_->allocate<float>(16384)));
  const auto before = cuda_->counters();
  gpu_->prefetch(refs, {location::device(0)}, {}, completion::complete);
  EXPECT_EQ(cuda_->counters().prefetch_calls, before.prefetch_calls + 4);
  for (const auto& r : refs)
    EXPECT_EQ(gpu_->attributes(r).last_prefetch_location, location::device(0));
}

TEST_F(gpu_allocator, PrefetchIntoACapturingStreamIsRefusedAndLeavesTheCaptureIntact) {
  auto ref = gpu_->allocate<float>(1024);
  void* stream = test::create_stream();
  test::begin_capture(stream);
  UMA_EXPECT_ERRC(gpu_->prefetch(ref, location::device(0), {stream}), errc::capture_in_progress);
  test::end_capture_and_destroy(stream);  // aborts the test if the capture was invalidated
  test::destroy_stream(stream);
}

TEST_F(gpu_allocator, MemoryKindOfAManagedRef) {
  auto ref = gpu_->allocate<float>(1024);
  EXPECT_EQ(gpu_->kind_of(ref.data()), memory_kind::cuda_managed);
  EXPECT_TRUE(gpu_->can_access(location::device(0), ref));
  EXPECT_TRUE(gpu_->can_access(location::host(), ref));
}

TEST_F(gpu_allocator, AllocationDuringAStreamCaptureIsRefused) {
  void* stream = test::create_stream();
  test::begin_capture(stream);
  UMA_EXPECT_ERRC((void)gpu_->allocate<float>(1024, {.stream = {stream}}),
                  errc::capture_in_progress);
  test::end_capture_and_destroy(stream);
  test::destroy_stream(stream);
  EXPECT_EQ(gpu_->stats().failures_of(errc::capture_in_progress), 1u);
  EXPECT_EQ(cuda_->counters().allocations, 0u);
}

TEST_F(gpu_allocator, PrefetchToTheHostNumaNodeOfDevice0) {
  const int numa = cuda_->capabilities(0).host_numa_id;
  if (numa < 0)
    GTEST_SKIP() << "device 0 reports no host NUMA node";
  auto ref = gpu_->allocate<float>(1 << 20);
  gpu_->prefetch(ref, location::host_numa(numa), {}, completion::complete);
  const auto last = gpu_->attributes(ref).last_prefetch_location;
  ASSERT_TRUE(last.has_value());
  EXPECT_TRUE(last->is_host_side()) << to_string(*last);
}

TEST_F(gpu_allocator, AStreamTiedPinKeepsTheRegionAcrossAStop) {
  void* stream = test::create_stream();
  auto ref = gpu_->allocate<float>(1 << 20);
  gate g;
  cuda_->launch_host_func({stream}, &gate::wait, &g);  // the stream stalls here
  ref.pin_until({stream});
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    gpu_->stop();
    stopped = true;
  });
  while (ref.valid())
    std::this_thread::yield();  // stopping, waiting for the pin
  EXPECT_EQ(cuda_->counters().frees, 0u);
  EXPECT_FALSE(stopped.load());
  g.open = true;  // the stream reaches the pin's callback, which releases it
  stopper.join();
  EXPECT_EQ(cuda_->counters().frees, 1u);
  EXPECT_TRUE(ref.stop_info()->pins_drained);
  test::stream_synchronize(stream);
  test::destroy_stream(stream);
}

TEST_F(gpu_allocator, StatsAreAnsweredWhileA1GiBPrefetchRuns) {
  // The prefetch of an actor client (a message): it runs on the device's lane, and the actor
  // answers meanwhile. (The facade's own prefetch runs on the caller's thread and holds no
  // lane: CallerCallsFromThreadsThatMadeNoCudaCall.)
  constexpr std::size_t bytes = 1ull << 30;
  auto ref = gpu_->allocate<std::byte>(bytes);
  std::memset(ref.pin().data(), 1, bytes);  // resident on the host
  std::atomic<bool> done{false};
  std::thread mover([&] {
    caf::scoped_actor self{sys_};
    self->request(gpu_->handle(), caf::infinite, prefetch_atom_v,
                  prefetch_request{{client::erase(ref)}, {location::device(0)}})
        .receive([](op_result&) {}, [&](caf::error& e) { ADD_FAILURE() << sys_.render(e); });
    done = true;
  });
  while (gpu_->stats().pending_jobs == 0 && !done)
    std::this_thread::yield();
  int answered = 0;
  std::chrono::nanoseconds worst{0};
  while (!done) {
    const auto t0 = std::chrono::steady_clock::now();
    (void)gpu_->stats();
    worst = std::max(worst, std::chrono::steady_clock::now() - t0);
    ++answered;
  }
  mover.join();
  std::printf("[ measure  ] %d stats replies during the 1 GiB prefetch, worst %.1f us\n", answered,
              std::chrono::duration<double, std::micro>(worst).count());
  EXPECT_GT(answered, 0);
}

TEST_F(gpu_allocator, CallerCallsFromThreadsThatMadeNoCudaCall) {
  // The facade's prefetch, advice and attributes run on the caller's thread: a fresh thread has
  // no CUDA context current, and cudaMemRangeGetAttribute (unlike the others) does not make one
  // current by itself.
  auto ref = gpu_->allocate<float>(1 << 20);
  const auto attrs = std::async(std::launch::async, [&] { return gpu_->attributes(ref); }).get();
  EXPECT_FALSE(attrs.read_mostly);
  std::async(std::launch::async, [&] {
    EXPECT_EQ(gpu_->prefetch(ref, location::device(0), {}, completion::complete).ranges, 1u);
  }).get();
  std::async(std::launch::async, [&] {
    EXPECT_EQ(gpu_->advise(ref, advice::set_read_mostly).backend_ranges, 1u);
  }).get();
  const auto after = std::async(std::launch::async, [&] { return gpu_->attributes(ref); }).get();
  EXPECT_TRUE(after.read_mostly);
  ASSERT_TRUE(after.last_prefetch_location);
  EXPECT_EQ(*after.last_prefetch_location, location::device(0));
  test::fill_on_device(ref.data(), ref.size(), 2.0f, nullptr);
  test::device_synchronize();
  EXPECT_EQ(ref.pin()[0], 2.0f);
}

TEST_F(gpu_allocator, BlocksWorkWithKernelsPrefetchAndAdvice) {
  auto pool = make_client(
      {.backend = {.instance = cuda_},
       .memory = {
           .policy = allocation_policy::pool, .quota_bytes = 1ull << 30, .slab_bytes = 64 << 20}});
  auto cache = pool->blocks();
  std::vector<ManagedRef<float>> blocks;
  for (int i = 0; i < 4; ++i)
    blocks.push_back(cache->allocate_n<float>(16 * 1024, 0, {}));
  std::vector<byte_ref> all;
  for (const auto& b : blocks)
    all.push_back(client::erase(b));
  const auto res = pool->prefetch(all, {location::device(0)}, {}, completion::complete);
  EXPECT_EQ(res.ranges, 4u);
  EXPECT_LT(res.backend_ranges, 4u);  // neighbours in the slab merge
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(pool->attributes(blocks[i]).last_prefetch_location, location::device(0));
    test::fill_on_device(blocks[i].data(), blocks[i].size(), static_cast<float>(i + 1), nullptr);
  }
  test::device_synchronize();
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    auto pin = blocks[i].pin();
    EXPECT_EQ(pin[0], static_cast<float>(i + 1));
    EXPECT_EQ(pin[pin.size() - 1], static_cast<float>(i + 1));
  }
  // Advice on a block is real, and gone when the block is handed out again.
  auto* where = blocks[2].data();
  pool->advise(blocks[2], advice::set_preferred_location, location::device(0));
  EXPECT_EQ(pool->attributes(blocks[2]).preferred_location, location::device(0));
  blocks.erase(blocks.begin() + 2);
  all.clear();
  (void)pool->flush();
  auto again = cache->allocate_n<float>(16 * 1024, 0, {});
  ASSERT_EQ(again.data(), where);
  EXPECT_FALSE(pool->attributes(again).preferred_location.has_value());
  pool->stop();
  EXPECT_FALSE(again.valid());
  UMA_EXPECT_ERRC((void)cache->allocate(1, 0, {}), errc::allocator_stopped);
}

TEST_F(gpu_allocator, WhileADevicePrefetchIsHeldOtherLanesAndNewSlabsAreServed) {
  auto faults = std::make_shared<fault_injecting_backend>(cuda_);
  auto pool = make_client(
      {.backend = {.instance = faults},
       .memory = {
           .policy = allocation_policy::pool, .quota_bytes = 1ull << 30, .slab_bytes = 16 << 20}});
  auto big = pool->allocate<float>(1 << 20);  // a 4 MiB block: one of a 16 MiB slab's four
  auto small = pool->allocate<float>(1024);
  test::resume_on_exit guard{*faults};
  faults->hold(backend_op::prefetch);
  // Sent as a message (an actor client's), so that it runs on the device's lane: the facade's
  // own prefetch runs on the caller's thread.
  std::thread mover([&] {
    caf::scoped_actor self{sys_};
    self->request(pool->handle(), caf::infinite, prefetch_atom_v,
                  prefetch_request{{client::erase(big)}, {location::device(0)}})
        .receive([](op_result&) {}, [&](caf::error& e) { ADD_FAILURE() << sys_.render(e); });
  });
  ASSERT_TRUE(faults->wait_for_held(std::chrono::seconds(10)));
  // The device lane is held: advice, attributes and a new slab (the actor's thread) go on.
  pool->advise(small, advice::set_accessed_by, location::device(0));
  const auto a = pool->attributes(small);
  ASSERT_EQ(a.accessed_by.size(), 1u);
  EXPECT_EQ(a.accessed_by[0], location::device(0));
  auto grown = pool->allocate<float>(16 << 20 >> 2);  // a 16 MiB block: a slab of its own
  EXPECT_EQ(pool->stats().live_leases, 3u);           // 4 MiB, 4 KiB and 16 MiB classes
  EXPECT_GE(pool->stats().pending_jobs, 1u);          // the prefetch is still held
  faults->resume();
  mover.join();
  EXPECT_EQ(pool->attributes(big).last_prefetch_location, location::device(0));
  test::fill_on_device(grown.data(), grown.size(), 2.0f, nullptr);
  test::device_synchronize();
  EXPECT_EQ(grown.pin()[grown.size() - 1], 2.0f);
}

TEST_F(gpu_allocator, TwoGpuPrefetchToDevice1AndPeerAccess) {
  if (cuda_->device_count() < 2)
    GTEST_SKIP() << "needs two GPUs, this machine has one";
  auto ref = gpu_->allocate<float>(1 << 20);
  gpu_->prefetch(ref, location::device(1), {}, completion::complete);
  EXPECT_EQ(gpu_->attributes(ref).last_prefetch_location, location::device(1));
  gpu_->advise(ref, advice::set_accessed_by, location::device(1));
  EXPECT_EQ(gpu_->attributes(ref).accessed_by, std::vector<location>{location::device(1)});
  EXPECT_TRUE(gpu_->can_access(location::device(1), ref));
}

TEST_F(gpu_allocator, SupervisorRestartsACudaAllocatorWhoseContextIsLost) {
  auto faults = std::make_shared<fault_injecting_backend>(cuda_);
  supervisor_config cfg;
  cfg.allocator.backend.instance = faults;
  cfg.allocator.memory.quota_bytes = 1ull << 30;
  cfg.backoff_initial = std::chrono::milliseconds(0);
  auto sup = spawn_supervisor(sys_, cfg);
  client c(sys_, sup);
  auto old_ref = c.allocate<float>(1 << 20);
  c.prefetch(old_ref, location::device(0), {}, completion::complete);
  faults->inject({backend_op::prefetch, 1, errc::context_lost});
  UMA_EXPECT_ERRC(c.prefetch(old_ref, location::host()), errc::context_lost);
  auto s = query_supervision(sys_, sup);
  for (int i = 0;
       i < 1000000 && !(s.current_generation == 2 && s.state == supervisor_state::running); ++i) {
    std::this_thread::yield();
    s = query_supervision(sys_, sup);
  }
  ASSERT_EQ(s.current_generation, 2u);
  EXPECT_FALSE(old_ref.valid());
  UMA_EXPECT_ERRC(c.prefetch(old_ref, location::device(0)), errc::allocator_stopped);
  auto fresh = c.allocate<float>(1 << 20);
  EXPECT_EQ(fresh.generation(), 2u);
  c.prefetch(fresh, location::device(0), {}, completion::complete);
  test::fill_on_device(fresh.data(), fresh.size(), 2.0f, nullptr);
  test::device_synchronize();
  EXPECT_EQ(fresh.pin()[12345], 2.0f);
  old_ref.reset();
  fresh.reset();
  c.stop();
  EXPECT_EQ(cuda_->counters().frees, cuda_->counters().allocations);
  EXPECT_EQ(cuda_->counters().bad_frees, 0u);
}

TEST_F(gpu_allocator, RequestsDuringRepeatedCudaRestartsAreAllAnswered) {
  auto faults = std::make_shared<fault_injecting_backend>(cuda_);
  faults->inject({backend_op::allocate, 10, errc::context_lost, true, true});
  supervisor_config cfg;
  cfg.allocator.backend.instance = faults;
  cfg.allocator.memory.quota_bytes = 1ull << 30;
  cfg.max_restarts = 100000;
  cfg.backoff_initial = std::chrono::milliseconds(0);
  auto sup = spawn_supervisor(sys_, cfg);
  std::atomic<std::uint64_t> ok{0}, refused{0}, unexpected{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t)
    clients.emplace_back([&] {
      client c(sys_, sup);
      c.set_max_block_bytes(0);  // every allocation a backend call: the message path
      for (int i = 0; i < 100; ++i) {
        try {
          auto ref = c.allocate<float>(4096);
          c.prefetch(ref, location::device(0));
          ++ok;
        } catch (const error& e) {
          (e.code() == errc::allocator_stopped || e.code() == errc::context_lost ? refused
                                                                                 : unexpected)++;
        }
      }
    });
  for (auto& t : clients)
    t.join();
  const auto s = query_supervision(sys_, sup);
  std::printf("[ measure  ] cuda: %llu restarts, %llu ok, %llu refused\n",
              static_cast<unsigned long long>(s.restarts),
              static_cast<unsigned long long>(ok.load()),
              static_cast<unsigned long long>(refused.load()));
  EXPECT_GT(s.restarts, 10u);
  EXPECT_EQ(unexpected.load(), 0u);
  client(sys_, sup).stop();
  EXPECT_EQ(cuda_->counters().frees, cuda_->counters().allocations);
  EXPECT_EQ(cuda_->counters().live_bytes, 0u);
}

}  // namespace
}  // namespace uma
