#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <uma/sys/backend.hpp>
#include <uma/sys/error.hpp>

namespace uma {

/// The backend operations a fault can target.
enum class backend_op : std::uint8_t {
  allocate,
  free,
  prefetch,
  discard,
  discard_prefetch,
  advise,
  attributes,
  kind_of,
  is_capturing,
  launch_host_func,
  synchronize,
  copy,  ///< copy between tiers (allocate and free cover the tiers' allocations too)
};
inline constexpr std::size_t backend_op_count = static_cast<std::size_t>(backend_op::copy) + 1;

/// "allocate", "prefetch", ...
[[nodiscard]] std::string_view to_string(backend_op op) noexcept;

/// One scripted failure: the `nth` call (1-based, counted from when the fault was injected) of
/// `op` fails with `code`; with `every`, every `nth` call from then on fails. `fatal` makes the
/// failure end the allocator incarnation (a `fatal_error`): "make the actor fail on a chosen
/// request". A failed `free` still releases the memory (nothing leaks) but is counted as bad.
struct fault {
  backend_op op = backend_op::allocate;
  std::uint64_t nth = 1;
  errc code = errc::backend_error;
  bool every = false;
  bool fatal = false;
};

/// Parses "OP:N:CODE[:every][:fatal]", e.g. "prefetch:3:context_lost" or
/// "allocate:50:backend_error:every:fatal". Throws `error(invalid_argument)` naming what is wrong.
[[nodiscard]] fault parse_fault(std::string_view spec);

/// A decorator for tests and `uma demo --inject-fault`: forwards every call to the wrapped
/// backend unless a scripted fault says this call fails. Thread-safe.
class fault_injecting_backend final : public backend {
 public:
  explicit fault_injecting_backend(std::shared_ptr<backend> inner);

  /// Adds a fault; its call count starts now.
  void inject(fault f);
  /// Removes every fault.
  void clear();
  /// Makes calls of `op` wait, before they run, until `resume()`: how a test keeps a backend
  /// call in flight (a long prefetch, a slab growth) to see what the allocator does meanwhile.
  void hold(backend_op op);
  /// Waits up to `timeout` until a call is held; true when one is.
  [[nodiscard]] bool wait_for_held(std::chrono::milliseconds timeout);
  /// Lets every held call go and holds no more.
  void resume();
  /// Calls of `op` seen so far (failed ones included).
  [[nodiscard]] std::uint64_t calls(backend_op op) const noexcept;
  /// Failures injected so far.
  [[nodiscard]] std::uint64_t injected() const noexcept { return injected_.load(); }
  /// The wrapped backend.
  [[nodiscard]] backend& inner() const noexcept { return *inner_; }

  /// A fake stream model for tests of stream-ordered reuse: from now on events are this
  /// decorator's own, and an event recorded on a stream completes only once the test calls
  /// `complete_stream` for that stream after the recording (the wrapped backend's streams are
  /// synchronous and would complete every event at once).
  void manual_events();
  /// Completes every event recorded on `stream` so far (manual events).
  void complete_stream(stream_view stream);
  /// Events recorded so far (manual events).
  [[nodiscard]] std::uint64_t events_recorded() const;
  /// Driver counters for tests of the migration ledger: from now on subscribe_um_counters
  /// returns what `make` returns (the wrapped backend's answer before).
  void provide_um_counters(std::function<um_counter_source()> make);
  /// Runs `after` on the calling thread after every launch_host_func from now on, once the
  /// wrapped backend has run (host) or queued (CUDA) the callback: a test holds an allocator
  /// lane there, after the callback sent a reply and before the lane's job ends.
  void after_host_func(std::function<void()> after);

  [[nodiscard]] backend_kind kind() const noexcept override { return inner_->kind(); }
  [[nodiscard]] std::string description() const override;
  [[nodiscard]] int device_count() const noexcept override { return inner_->device_count(); }
  [[nodiscard]] const device_capabilities& capabilities(int ordinal) const override {
    return inner_->capabilities(ordinal);
  }
  [[nodiscard]] int host_numa_nodes() const noexcept override { return inner_->host_numa_nodes(); }
  [[nodiscard]] std::size_t guaranteed_alignment() const noexcept override {
    return inner_->guaranteed_alignment();
  }
  [[nodiscard]] std::size_t default_quota() const override { return inner_->default_quota(); }

  [[nodiscard]] void* allocate_managed(std::size_t bytes, attach_flag attach) override;
  void free_managed(void* ptr, std::size_t bytes) noexcept override;
  [[nodiscard]] void* allocate_tier(memory_kind kind, std::size_t bytes, int device) override;
  void free_tier(memory_kind kind, void* ptr, std::size_t bytes, int device) noexcept override;
  void copy(void* dst, const void* src, std::size_t bytes, stream_view stream) override;
  void prefetch(std::span<const byte_range> ranges, std::span<const location> locations,
                stream_view stream) override;
  void discard(std::span<const byte_range> ranges, stream_view stream) override;
  void discard_prefetch(std::span<const byte_range> ranges, std::span<const location> locations,
                        stream_view stream) override;
  void advise(byte_range range, advice a, location loc) override;
  [[nodiscard]] range_attributes attributes(byte_range range) override;
  [[nodiscard]] memory_kind kind_of(const void* ptr) override;
  [[nodiscard]] bool is_capturing(stream_view stream) override;
  void launch_host_func(stream_view stream, void (*fn)(void*), void* arg) override;
  void synchronize() override;
  /// Counts as a launch_host_func call: both are how a stream's completion is awaited.
  void wait_stream(stream_view stream) override;
  [[nodiscard]] void* create_event() override;
  void record_event(void* event, stream_view stream) override;
  [[nodiscard]] bool event_done(void* event) override;
  void destroy_event(void* event) noexcept override;
  void prepare_thread() noexcept override { inner_->prepare_thread(); }
  [[nodiscard]] backend_counters counters() const noexcept override;
  [[nodiscard]] um_counter_source subscribe_um_counters() override;

 private:
  struct armed {
    fault spec;
    std::uint64_t start;  // calls of spec.op when injected
    bool spent = false;
  };
  /// Counts a call of `op`; returns the fault to raise, if one is due.
  std::optional<fault> tick(backend_op op);
  /// Waits while calls of `op` are held (`hold`).
  void wait_while_held(backend_op op);
  /// Waits while held, counts a call and throws if a fault is due.
  void maybe_fail(backend_op op);

  std::shared_ptr<backend> inner_;
  mutable std::mutex mutex_;
  std::array<std::uint64_t, backend_op_count> calls_{};
  std::vector<armed> faults_;
  std::atomic<std::uint64_t> injected_{0};
  std::atomic<std::uint64_t> failed_frees_{0};
  std::mutex hold_mutex_;
  std::condition_variable hold_changed_;
  std::optional<backend_op> holding_;
  std::size_t held_ = 0;
  // The fake stream model (under mutex_): an event is done once its stream's completed mark
  // reaches the mark it was recorded at.
  struct manual_event {
    void* stream = nullptr;
    std::uint64_t mark = 0;  // 0: never recorded
  };
  bool manual_events_ = false;
  std::vector<std::pair<void*, std::uint64_t>> recorded_marks_;   // per stream
  std::vector<std::pair<void*, std::uint64_t>> completed_marks_;  // per stream
  std::uint64_t events_recorded_ = 0;
  std::function<um_counter_source()> um_counters_;  // under mutex_
  std::function<void()> after_host_func_;           // under mutex_
};

}  // namespace uma
