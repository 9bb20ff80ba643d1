// The worker pipeline's actors and its driver (see examples/worker_pipeline.hpp).
//
// One batch, as a producer sees it (each arrow is a typed request to the allocator; the producer
// never blocks, it continues in the reply handler):
//
//   allocate floats -> fill on the host (pinned) -> prefetch to GPU 0 (host backend: the host)
//   -> transform (CUDA kernel on the producer's stream / host loop)
//   -> prefetch to the host, reply when the stream finished -> send the ref to a consumer
//
// The consumer pins the ref, checks every element and drops it; the last drop hands the region
// back to the allocator, which frees it.

#include "examples/worker_pipeline.hpp"

#include <cstdio>
#include <exception>
#include <limits>
#include <utility>

#include <caf/atom.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <uma/messages/error_category.hpp>

#ifdef UMA_PIPELINE_CUDA
#include "examples/worker_pipeline_kernel.hpp"
#endif

namespace uma::pipeline {

namespace {

// -- the pipeline's own messages (local only: they carry refs) ----------------------------------

using next_atom = caf::atom_constant<caf::atom("pl_next")>;
using batch_atom = caf::atom_constant<caf::atom("pl_batch")>;
using verified_atom = caf::atom_constant<caf::atom("pl_checked")>;
using failed_atom = caf::atom_constant<caf::atom("pl_failed")>;

/// A consumer takes (batch, ref, producer, batch index), verifies and reports to the collector.
using consumer_actor =
    caf::typed_actor<caf::reacts_to<batch_atom, byte_ref, std::uint32_t, std::uint32_t>>;

constexpr float scale = 2.0f;

/// What the producer writes before the transform: small integers, exact in float.
[[nodiscard]] float initial_value(std::size_t index) noexcept {
  return static_cast<float>(index % 1024);
}

/// The transform's offset for one batch: differs between batches, so a ref delivered to the
/// wrong check (or a stale region) shows up as a mismatch.
[[nodiscard]] float offset_of(std::uint32_t producer, std::uint32_t batch) noexcept {
  return static_cast<float>((producer * 131u + batch) % 1000u);
}

// -- consumer ------------------------------------------------------------------------------------

/// Number of elements of `ref` that differ from what producer/batch should have made.
[[nodiscard]] std::uint64_t count_mismatches(const ManagedRef<float>& ref, std::uint32_t producer,
                                             std::uint32_t batch) {
  const auto pin = ref.pin();
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < pin.size(); ++i)
    wrong += pin[i] != expected_value(producer, batch, i) ? 1 : 0;
  return wrong;
}

/// Checks every batch it is sent and reports to the collector, a blocking (dynamically typed)
/// actor, which a typed actor reaches by anon_send.
consumer_actor::behavior_type consumer(caf::actor collector) {
  return {
      [collector](batch_atom, const byte_ref& raw, std::uint32_t producer, std::uint32_t batch) {
        try {
          const auto wrong = count_mismatches(raw.as<float>(), producer, batch);
          caf::anon_send(collector, verified_atom::value, producer, batch, wrong);
        } catch (const error& e) {
          caf::anon_send(collector, failed_atom::value, producer, batch,
                         std::string("verify: ") + e.what());
        }
      },
  };
}

// -- producer ------------------------------------------------------------------------------------

/// What one producer is told at spawn.
struct producer_setup {
  std::uint32_t id = 0;
  std::uint32_t batches = 0;
  std::size_t floats = 0;
  compute_target target = compute_target::host_loop;
  managed_allocator_actor allocator;
  std::vector<consumer_actor> consumers;
  caf::actor collector;
  caf::duration timeout;
};

struct producer_state {
  producer_setup setup;
  std::uint32_t next = 0;  ///< the next batch to make
  void* stream = nullptr;  ///< GPU path: this producer's stream; host path: none (null)

  producer_state() = default;
  producer_state(const producer_state&) = delete;
  producer_state& operator=(const producer_state&) = delete;
  ~producer_state() {
#ifdef UMA_PIPELINE_CUDA
    destroy_stream(stream);
#endif
  }

  static inline const char* name = "uma_pipeline_producer";
};

using producer_pointer = caf::stateful_actor<producer_state>*;

void produce_next(producer_pointer self);

/// Reports batch `batch` as lost and moves on to the next one.
void fail_batch(producer_pointer self, std::uint32_t batch, const std::string& what) {
  self->send(self->state.setup.collector, failed_atom::value, self->state.setup.id, batch, what);
  self->send(self, next_atom::value);
}

/// An error handler for a request made for `batch`.
auto on_error(producer_pointer self, std::uint32_t batch, const char* step) {
  return [self, batch, step](caf::error& err) {
    fail_batch(self, batch, std::string(step) + ": " + render(err));
  };
}

/// The transform step: the batch is at its target; run y = x * scale + offset there.
void transform(producer_pointer self, const ManagedRef<float>& ref, std::uint32_t batch) {
  const float offset = offset_of(self->state.setup.id, batch);
#ifdef UMA_PIPELINE_CUDA
  if (self->state.setup.target == compute_target::gpu_kernel) {
    float* data = ref.data();
    if (data == nullptr)
      raise(errc::allocator_stopped, "the batch went inert before its kernel");
    scale_add_on_device(data, ref.size(), scale, offset, self->state.stream);
    // Kernels queued before an allocator stop keep their memory until the stream passes here.
    ref.pin_until(stream_view{self->state.stream});
    return;
  }
#endif
  const auto pin = ref.pin();
  for (auto& x : pin)
    x = x * scale + offset;
}

/// Step 3: bring the batch back to the host, waiting for the stream, then hand it over.
void return_to_host(producer_pointer self, const byte_ref& raw, std::uint32_t batch) {
  const auto& s = self->state.setup;
  prefetch_request back{
      {raw}, {location::host()}, stream_view{self->state.stream}, completion::complete};
  self->request(s.allocator, s.timeout, prefetch_atom::value, std::move(back))
      .then(
          [self, raw, batch](const op_result&) {
            const auto& s = self->state.setup;
            const auto& to = s.consumers[(s.id + batch) % s.consumers.size()];
            self->send(to, batch_atom::value, raw, s.id, batch);
            self->send(self, next_atom::value);
          },
          on_error(self, batch, "prefetch to host"));
}

/// Step 2: the batch is filled; move it to where the transform runs, transform it.
void place_and_transform(producer_pointer self, const byte_ref& raw, std::uint32_t batch) {
  const auto& s = self->state.setup;
  const auto target =
      s.target == compute_target::gpu_kernel ? location::device(0) : location::host();
  prefetch_request there{{raw}, {target}, stream_view{self->state.stream}, completion::enqueued};
  self->request(s.allocator, s.timeout, prefetch_atom::value, std::move(there))
      .then(
          [self, raw, batch](const op_result&) {
            try {
              transform(self, raw.as<float>(), batch);
            } catch (const std::exception& e) {
              fail_batch(self, batch, std::string("transform: ") + e.what());
              return;
            }
            return_to_host(self, raw, batch);
          },
          on_error(self, batch, "prefetch to target"));
}

/// Step 1: allocate a batch and fill it on the host.
void produce_next(producer_pointer self) {
  auto& st = self->state;
  if (st.next == st.setup.batches) {
    self->quit();
    return;
  }
  const std::uint32_t batch = st.next++;
  allocate_request request;
  request.count = st.setup.floats;
  request.element_size = sizeof(float);
  request.alignment = alignof(float);
  request.label = "pipeline p" + std::to_string(st.setup.id) + " b" + std::to_string(batch);
  self->request(st.setup.allocator, st.setup.timeout, allocate_atom::value, std::move(request))
      .then(
          [self, batch](byte_ref& raw) {
            try {
              const auto pin = raw.as<float>().pin();
              for (std::size_t i = 0; i < pin.size(); ++i)
                pin[i] = initial_value(i);
            } catch (const error& e) {
              fail_batch(self, batch, std::string("fill: ") + e.what());
              return;
            }
            place_and_transform(self, raw, batch);
          },
          on_error(self, batch, "allocate"));
}

caf::behavior producer(producer_pointer self, producer_setup setup) {
  self->state.setup = std::move(setup);
#ifdef UMA_PIPELINE_CUDA
  if (self->state.setup.target == compute_target::gpu_kernel) {
    try {
      self->state.stream = create_stream();
    } catch (const std::exception& e) {
      // Without a stream no batch can be made: report every one as lost.
      for (std::uint32_t b = 0; b < self->state.setup.batches; ++b)
        self->send(self->state.setup.collector, failed_atom::value, self->state.setup.id, b,
                   std::string("create stream: ") + e.what());
      self->quit();
      return {};
    }
  }
#endif
  self->send(self, next_atom::value);
  return {
      [self](next_atom) { produce_next(self); },
  };
}

// -- helpers for the driver -----------------------------------------------------------------------

[[nodiscard]] std::string describe_bytes(std::size_t bytes) {
  char text[32];
  if (bytes >= (std::size_t{1} << 20))
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else if (bytes >= 1024)
    std::snprintf(text, sizeof text, "%.1f KiB", static_cast<double>(bytes) / 1024);
  else
    std::snprintf(text, sizeof text, "%zu bytes", bytes);
  return text;
}

void check_options(const pipeline_options& o) {
  constexpr auto max_index = std::numeric_limits<std::uint32_t>::max();
  if (o.producers == 0 || o.consumers == 0 || o.batches == 0 || o.floats == 0)
    raise(errc::invalid_argument,
          "pipeline: every count must be at least 1 (got " + describe(o) + ")");
  if (o.producers > max_index || o.batches > max_index)
    raise(errc::invalid_argument, "pipeline: too many producers or batches (" + describe(o) + ")");
  if (o.timeout.count() <= 0)
    raise(errc::invalid_argument, "pipeline: the timeout must be positive");
}

/// The allocator's counters now (its backend, what it holds before the run).
[[nodiscard]] allocator_stats stats_of(caf::scoped_actor& self,
                                       const managed_allocator_actor& allocator,
                                       caf::duration timeout) {
  allocator_stats stats;
  caf::error failure;
  self->request(allocator, timeout, stats_atom::value)
      .receive([&](allocator_stats& s) { stats = std::move(s); },
               [&](caf::error& e) { failure = std::move(e); });
  if (failure)
    throw to_uma_error(failure);
  return stats;
}

}  // namespace

std::string_view to_string(compute_target target) noexcept {
  return target == compute_target::gpu_kernel ? "CUDA kernel on GPU 0" : "host loop";
}

float expected_value(std::uint32_t producer, std::uint32_t batch, std::size_t index) noexcept {
  return initial_value(index) * scale + offset_of(producer, batch);
}

std::string describe(const pipeline_options& o) {
  return std::to_string(o.producers) + " producer(s) x " + std::to_string(o.batches) +
         " batch(es) of " + std::to_string(o.floats) + " floats (" +
         describe_bytes(o.floats * sizeof(float)) + ") -> " + std::to_string(o.consumers) +
         " consumer(s)";
}

std::string summarize(const pipeline_result& r) {
  char elapsed[32];
  std::snprintf(elapsed, sizeof elapsed, "%.1f ms",
                std::chrono::duration<double, std::milli>(r.elapsed).count());
  std::string text =
      std::to_string(r.verified) + "/" + std::to_string(r.batches) + " batches verified (" +
      std::string(to_string(r.target)) + ") in " + elapsed + ", " +
      std::to_string(r.mismatched_batches) + " mismatched (" +
      std::to_string(r.mismatched_elements) + " elements), " + std::to_string(r.errors.size()) +
      " error(s), live regions after flush: " + std::to_string(r.stats.live_regions) +
      (r.live_regions_before == 0
           ? std::string()
           : " (" + std::to_string(r.live_regions_before) + " before the run)") +
      "\n";
  for (const auto& e : r.errors)
    text += "  error: " + e + "\n";
  return text;
}

namespace {

/// Receives the consumers' verdicts until every batch is finished or nothing happens for
/// `options.timeout`, reporting progress after each.
void collect(caf::scoped_actor& self, const pipeline_options& options,
             const progress_callback& progress, pipeline_result& result) {
  pipeline_progress now{0, result.batches, 0, 0};
  bool stalled = false;
  while (now.finished < now.total && !stalled) {
    self->receive(
        [&](verified_atom, std::uint32_t, std::uint32_t, std::uint64_t wrong) {
          ++result.verified;
          if (wrong != 0) {
            ++result.mismatched_batches;
            result.mismatched_elements += wrong;
          }
          now.mismatched = result.mismatched_batches;
          ++now.finished;
        },
        [&](failed_atom, std::uint32_t producer, std::uint32_t batch, std::string& what) {
          result.errors.push_back("producer " + std::to_string(producer) + " batch " +
                                  std::to_string(batch) + ": " + std::move(what));
          ++now.failed;
          ++now.finished;
        },
        caf::after(options.timeout) >>
            [&] {
              stalled = true;
              result.errors.push_back("no progress for " + std::to_string(options.timeout.count()) +
                                      " s with " + std::to_string(now.finished) + "/" +
                                      std::to_string(now.total) + " batches finished");
            });
    if (!stalled && progress)
      progress(now);
  }
}

}  // namespace

pipeline_result run_pipeline(caf::actor_system& sys, const managed_allocator_actor& allocator,
                             const pipeline_options& options, const progress_callback& progress) {
  check_options(options);
  const caf::duration timeout{options.timeout};
  caf::scoped_actor self{sys};

  pipeline_result result;
  result.batches = options.producers * options.batches;
  const auto before = stats_of(self, allocator, timeout);
  result.live_regions_before = before.live_regions;
#ifdef UMA_PIPELINE_CUDA
  if (before.backend == "cuda")
    result.target = compute_target::gpu_kernel;
#endif
  // Without the kernel (a build without CUDA) the transform runs on the host, where the batches
  // are prefetched.

  const auto start = std::chrono::steady_clock::now();
  const auto collector = caf::actor_cast<caf::actor>(self);
  std::vector<consumer_actor> consumers;
  for (std::size_t i = 0; i < options.consumers; ++i)
    consumers.push_back(sys.spawn(consumer, collector));
  std::vector<caf::actor> producers;
  for (std::size_t i = 0; i < options.producers; ++i)
    producers.push_back(sys.spawn(
        producer,
        producer_setup{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(options.batches),
                       options.floats, result.target, allocator, consumers, collector, timeout}));

  collect(self, options, progress, result);
  result.elapsed = std::chrono::steady_clock::now() - start;

  // Stop every actor and wait until they are gone, so every ref they held is dropped before the
  // flush: what the flush then reports as live was leaked, not merely in flight.
  for (const auto& p : producers)
    self->send_exit(p, caf::exit_reason::user_shutdown);
  for (const auto& c : consumers)
    self->send_exit(c, caf::exit_reason::user_shutdown);
  self->wait_for(producers, consumers);

  self->request(allocator, timeout, flush_atom::value)
      .receive([&](allocator_stats& s) { result.stats = std::move(s); },
               [&](caf::error& e) { result.errors.push_back("flush: " + render(e)); });
  return result;
}

}  // namespace uma::pipeline
