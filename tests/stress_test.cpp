// Stress: 16 threads clone, drop, pin, unpin and view shared refs while the allocator under them
// is failed and restarted by its supervisor, again and again. Bounded in operations (1 M in
// all) and in time (every wait has a deadline); no sleeps. At the end: nothing live, every
// region freed exactly once (host backend counters), and no pin ever saw freed memory.
//
// How "saw freed memory" is caught: the host backend poisons freed regions (PROT_NONE, kept in
// a quarantine so the address is not reused), so a read through a pin of a freed region faults;
// a handler names it before the sanitizer's report. Each region also carries a stamp (its id and
// generation) written before it is shared: a pin that reads another region's stamp saw memory
// that was freed and handed out again. And every pin checks that its range is a live backend
// allocation.

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include "support/reliability_fixture.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;

constexpr int worker_count = 16;
constexpr std::uint64_t total_operations = 1'000'000;
constexpr std::size_t slot_count = 64;
constexpr int planned_restarts = 100;

/// A ref many threads share: copied out (clone) and replaced under a lock, used outside it.
struct shared_slot {
  std::mutex mutex;
  ManagedRef<std::uint64_t> ref;
};

/// What the workers saw.
struct tally {
  std::atomic<std::uint64_t> operations{0};
  std::atomic<std::uint64_t> pins_verified{0};
  std::atomic<std::uint64_t> pins_refused{0};  // inert: the generation had stopped
  std::atomic<std::uint64_t> views{0};
  std::atomic<std::uint64_t> wrong_stamp{0};  // a pin read another region's memory
  std::atomic<std::uint64_t> not_live{0};     // a pin's range was not a live allocation
  std::atomic<std::uint64_t> unexpected{0};   // an exception no operation may throw
};

struct xorshift {
  std::uint64_t s;
  std::uint64_t next() noexcept {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  std::size_t below(std::size_t n) noexcept { return static_cast<std::size_t>(next() % n); }
};

// -- a read after free names itself before the sanitizer (or the default action) reports it ----

struct sigaction previous_segv {};

void on_segv(int, siginfo_t* info, void*) {
  static const char what[] =
      "stress: SIGSEGV: a pinned read touched poisoned (freed) host-backend memory\n";
  (void)!write(STDERR_FILENO, what, sizeof what - 1);
  (void)info;
  // Hand the fault to whoever handled it before (ASan/TSan report, or the default core dump):
  // the faulting access runs again under the restored handler.
  sigaction(SIGSEGV, &previous_segv, nullptr);
}

class segv_namer {
 public:
  segv_namer() {
    struct sigaction sa {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_segv);
  }
  segv_namer(const segv_namer&) = delete;
  segv_namer& operator=(const segv_namer&) = delete;
  ~segv_namer() { sigaction(SIGSEGV, &previous_segv, nullptr); }
};

class stress : public test::reliability_fixture {
 protected:
  /// Reads a pinned view: the region's stamp must be its own and its range a live allocation.
  template <class T>
  void verify(const Pin<T>& pin, tally& t) {
    const auto& ref = pin.ref();
    const auto* region_start = detail::record_of(ref)->data;
    if (!backend_->is_live(pin.data(), pin.size() * sizeof(T)) ||
        !backend_->is_live(region_start, 2 * sizeof(std::uint64_t)))
      ++t.not_live;
    std::uint64_t stamp[2];
    std::memcpy(stamp, region_start, sizeof stamp);  // faults if the region was poisoned
    volatile T last = pin[pin.size() - 1];
    (void)last;
    if (stamp[0] != ref.id() || stamp[1] != ref.generation())
      ++t.wrong_stamp;
    ++t.pins_verified;
  }

  /// Fills every slot with a fresh region of the current generation, stamped before it is
  /// shared. The refs the slots held before are dropped (inert ones free nothing).
  void publish(client& c, xorshift& rng) {
    for (auto& slot : slots_) {
      auto ref = c.allocate<std::uint64_t>(2 + rng.below(3 * 512));  // up to 3 pages
      {
        auto pin = ref.pin();
        pin[0] = ref.id();
        pin[1] = ref.generation();
      }
      std::lock_guard lock(slot.mutex);
      std::swap(slot.ref, ref);
    }  // `ref` (the old one) is dropped here, outside the lock
  }

  void work(int index, tally& t) {
    xorshift rng{0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(index + 1)};
    std::vector<ManagedRef<std::uint64_t>> held;
    std::vector<Pin<std::uint64_t>> pins;
    const std::uint64_t share = total_operations / worker_count;
    for (std::uint64_t n = 0; n < share; ++n) {
      if (t.operations.load(std::memory_order_relaxed) >= allowance_.load()) {
        pins.clear();  // pins are short: a worker waiting for the controller holds none
        while (t.operations.load(std::memory_order_relaxed) >= allowance_.load())
          std::this_thread::yield();  // the controller paces generations by operations done
      }
      try {
        auto& slot = slots_[rng.below(slot_count)];
        switch (rng.below(8)) {
          case 0:
          case 1: {  // clone
            std::lock_guard lock(slot.mutex);
            if (!slot.ref.empty())
              held.push_back(slot.ref);
            break;
          }
          case 2: {  // drop: a held clone, or the slot's own ref
            if (!held.empty()) {
              std::swap(held[rng.below(held.size())], held.back());
              held.pop_back();
            } else {
              ManagedRef<std::uint64_t> taken;
              {
                std::lock_guard lock(slot.mutex);
                std::swap(taken, slot.ref);
              }
            }
            break;
          }
          case 3: {  // pin
            if (held.empty())
              break;
            if (auto pin = held[rng.below(held.size())].try_pin()) {
              verify(*pin, t);
              pins.push_back(std::move(*pin));
            } else {
              ++t.pins_refused;
            }
            break;
          }
          case 4:  // unpin
            if (!pins.empty())
              pins.erase(pins.begin() + static_cast<std::ptrdiff_t>(rng.below(pins.size())));
            break;
          case 5: {  // typed views: bytes, a subview, back to words; pinned through the view
            if (held.empty())
              break;
            const auto& ref = held[rng.below(held.size())];
            if (ref.empty())
              break;
            auto words = ref.as<std::byte>().as<std::uint32_t>();
            auto tail = words.subview(words.size() / 2, words.size() - words.size() / 2);
            if (auto pin = tail.try_pin())
              verify(*pin, t);
            ++t.views;
            break;
          }
          case 6: {  // put a held clone back into a slot (re-share)
            if (held.empty())
              break;
            auto back = held.back();
            {
              std::lock_guard lock(slot.mutex);
              std::swap(slot.ref, back);
            }
            if (!back.empty())
              held.push_back(std::move(back));  // the slot's previous ref
            break;
          }
          default:  // read the handle's state: data() is the region's, and inert is forever
            if (!held.empty()) {
              const auto& ref = held[rng.below(held.size())];
              const bool was_valid = ref.valid();
              const auto* p = ref.data();
              const auto* expected = reinterpret_cast<const std::uint64_t*>(
                  detail::record_of(ref)->data + ref.byte_offset());
              if ((p != nullptr && p != expected) || (!was_valid && (p != nullptr || ref.valid())))
                ++t.unexpected;
            }
            break;
        }
        if (held.size() > 8)
          held.erase(held.begin());
        if (pins.size() > 2)
          pins.erase(pins.begin());
      } catch (const std::exception&) {
        ++t.unexpected;
      }
      t.operations.fetch_add(1, std::memory_order_relaxed);
    }
  }

  std::shared_ptr<fault_injecting_backend> faults_ =
      std::make_shared<fault_injecting_backend>(backend_);
  std::array<shared_slot, slot_count> slots_;
  std::atomic<std::uint64_t> allowance_{0};  // operations the workers may have done so far
};

TEST_F(stress, SixteenThreadsShareRefsWhileTheAllocatorIsRestartedUnderThem) {
  segv_namer namer;
  supervisor_config cfg;
  cfg.allocator.backend.instance = faults_;
  cfg.allocator.supervision.drain_timeout =
      60s;  // pins are short: nothing may be leaked for a timeout
  cfg.max_restarts = 1'000'000;
  cfg.backoff_initial = 0ms;
  auto sup = spawn_supervisor(sys_, cfg);
  client c(sys_, sup);
  xorshift rng{42};
  publish(c, rng);

  tally t;
  std::vector<std::thread> workers;
  for (int i = 0; i < worker_count; ++i)
    workers.emplace_back([this, i, &t] { work(i, t); });

  const auto deadline = std::chrono::steady_clock::now() + 240s;
  const auto worker_total = total_operations / worker_count * worker_count;
  const auto chunk = worker_total / planned_restarts;
  std::uint64_t restarts = 0;
  bool in_time = true;
  const auto reach = [&](std::uint64_t ops) {
    while (t.operations.load() < ops && (in_time = std::chrono::steady_clock::now() < deadline))
      std::this_thread::yield();
  };
  for (int k = 0; k < planned_restarts && in_time; ++k) {
    // Progress-paced, not timed: the workers may run one chunk further; a quarter into it the
    // live generation is made to fail, so its post_stop runs while they clone, pin and drop.
    allowance_ = (k + 1) * chunk;
    reach(k * chunk + chunk / 4);
    // Queue backend work on the live generation first, so the stop also drains a busy worker.
    std::vector<byte_ref> some;
    for (std::size_t i = 0; i < 4; ++i) {
      std::lock_guard lock(slots_[i].mutex);
      const auto& ref = slots_[i].ref;
      if (ref.valid() && std::none_of(some.begin(), some.end(),
                                      [&](const byte_ref& b) { return b.id() == ref.id(); }))
        some.push_back(client::erase(ref));
    }
    try {
      if (!some.empty())
        c.prefetch(some, {location::host()});
    } catch (const error& e) {
      ADD_FAILURE() << "prefetch on a live generation failed: " << e.what();
    }
    // The incarnation replies the error, quits, post_stop frees its regions under the workers,
    // and the supervisor starts the next generation.
    const auto before = query_supervision(sys_, sup).current_generation;
    faults_->inject({backend_op::kind_of, 1, errc::context_lost, false, true});
    UMA_EXPECT_ERRC((void)c.kind_of(this), errc::context_lost);
    auto s = query_supervision(sys_, sup);
    while ((s.current_generation != before + 1 || s.state != supervisor_state::running) &&
           (in_time = std::chrono::steady_clock::now() < deadline)) {
      std::this_thread::yield();
      s = query_supervision(sys_, sup);
    }
    ++restarts;
    publish(c, rng);
  }
  allowance_ = worker_total;
  for (auto& w : workers)
    w.join();
  ASSERT_TRUE(in_time) << "the stress run passed its 240 s bound";

  const auto s = query_supervision(sys_, sup);
  for (auto& slot : slots_)
    slot.ref.reset();
  c.stop();  // stops the supervisor and its last incarnation; post_stop frees what is left

  std::uint64_t leaked = 0;
  for (const auto& g : s.generations)
    if (!g.alive) {
      leaked += g.regions_leaked;
      EXPECT_EQ(g.final_stats.live_bytes, 0u) << "generation " << g.generation;
    }
  const auto counters = backend_->counters();
  std::printf(
      "[ measure  ] %llu operations by %d threads; %llu restarts survived (%zu generations); "
      "%llu pins verified, %llu refused as inert, %llu typed views; %llu regions allocated, "
      "%llu freed\n",
      static_cast<unsigned long long>(t.operations.load()), worker_count,
      static_cast<unsigned long long>(restarts), s.generations.size(),
      static_cast<unsigned long long>(t.pins_verified.load()),
      static_cast<unsigned long long>(t.pins_refused.load()),
      static_cast<unsigned long long>(t.views.load()),
      static_cast<unsigned long long>(counters.allocations),
      static_cast<unsigned long long>(counters.frees));

  EXPECT_EQ(t.operations.load(), worker_total);
  EXPECT_GE(restarts, static_cast<std::uint64_t>(planned_restarts));
  EXPECT_EQ(s.restarts, restarts);
  EXPECT_EQ(t.wrong_stamp.load(), 0u) << "a pin read a region that was freed and reused";
  EXPECT_EQ(t.not_live.load(), 0u) << "a pin's range was not a live allocation";
  EXPECT_EQ(t.unexpected.load(), 0u);
  EXPECT_GT(t.pins_verified.load(), 0u);
  EXPECT_EQ(leaked, 0u) << "regions leaked although every pin was released within the drain "
                           "timeout";
  // Every region freed exactly once, nothing live: the backend's own counts.
  EXPECT_EQ(counters.frees, counters.allocations);
  EXPECT_EQ(counters.bad_frees, 0u);
  EXPECT_EQ(counters.live_allocations, 0u);
  EXPECT_EQ(counters.live_bytes, 0u);
}

}  // namespace
}  // namespace uma
