#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include <uma/memory/allocator_stats.hpp>
#include <uma/memory/block_allocator.hpp>
#include <uma/memory/managed_ref.hpp>
#include <uma/memory/stop_report.hpp>
#include <uma/memory/vocabulary.hpp>
#include <uma/messages/handles.hpp>
#include <uma/messages/memory_requests.hpp>

// This header includes what its declarations need and no more: the configs are in
// <uma/actors/allocator_config.hpp> (allocator_config) and <uma/actors/supervision.hpp>
// (supervisor_config), spawn_allocator is in <uma/actors/managed_allocator.hpp>, spawn_supervisor
// and query_supervision in <uma/actors/allocator_supervisor.hpp>, the typed interface (requests to
// handle()) in <uma/messages/interface.hpp>, the residency requests and replies in
// <uma/messages/requests.hpp>, snapshots in <uma/memory/allocator_snapshot.hpp>, the region
// report in <uma/memory/region_info.hpp>.

namespace uma {

struct allocator_config;   // <uma/actors/allocator_config.hpp>
struct supervisor_config;  // <uma/actors/supervision.hpp>

/// Options of one allocation through the facade.
struct allocate_options {
  std::size_t alignment = 0;  ///< 0: alignof(T), at least the backend's natural alignment
  attach_flag attach = attach_flag::global;
  stream_view stream{};
  std::string label{};
  /// Managed memory (the default), or a tier's: `memory_kind::pinned_host` (the host tier) or
  /// `memory_kind::cuda_device` (device memory on `device`, charged to its budget). Tiers never
  /// migrate; move their bytes with uma::copy (<uma/memory/copy.hpp>). docs/design.md "Tiers".
  memory_kind kind = memory_kind::cuda_managed;
  int device = 0;  ///< the device of cuda_device memory
};

/// What the allocator's last post_stop did, as the client that stopped it saw it: both parts
/// come from the post_stop that ran (through `allocator_config::supervision.on_stop`), not from a
/// request sent before the stop.
struct final_report {
  allocator_stats stats{};  ///< the counters at the end of post_stop
  stop_report stop{};       ///< regions and bytes freed and leaked, leaked ids, pins, duration
};

/// An access plan sent by client::will_access_async and not yet answered.
class pending_plan {
 public:
  pending_plan(pending_plan&&) noexcept;
  pending_plan& operator=(pending_plan&&) noexcept;
  ~pending_plan();
  /// Waits for the plan's reply (at most the client's timeout) and returns it; throws the
  /// allocator's refusal as uma::error, and invalid_argument when called a second time.
  residency_result get();
  /// False once get() was called (or after a move).
  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }

 private:
  friend class client;
  /// The plan's ticket in the client's request channel (defined in client.cpp, so that this header
  /// does not name the channel's internals).
  struct state;
  explicit pending_plan(std::unique_ptr<state> s) noexcept;
  std::unique_ptr<state> state_;
};

/// A blocking facade over the allocator for code that is not an actor: tools, tests, plain
/// threads. Each call sends one request and waits for its reply; a uma error reply is thrown as
/// `uma::error` with the same code and message. The request goes through the client's call
/// channel (docs/design.md "Blocking callers"): an idle allocator
/// runs the request on the calling thread, the reply fills a slot the caller spins on, so that a
/// call costs about what the allocator's work costs rather than two thread wake-ups. Safe to use
/// from several threads at once.
class client {
 public:
  /// Talks to an existing allocator; does not stop it.
  client(caf::actor_system& sys, managed_allocator_actor allocator);
  /// Talks to an existing supervisor (`supervisor()` hands it out); does not stop it.
  client(caf::actor_system& sys, allocator_supervisor_actor supervisor);
  /// Spawns an allocator with the default config and stops it when the client is destroyed.
  explicit client(caf::actor_system& sys);
  /// Spawns an allocator with `config` and stops it when the client is destroyed.
  client(caf::actor_system& sys, allocator_config config);
  /// Spawns a supervisor with `config` (which restarts the allocator per its decision table)
  /// and stops it when the client is destroyed. `config.allocator.supervision.on_stop` still runs.
  client(caf::actor_system& sys, supervisor_config config);
  client(const client&) = delete;
  client& operator=(const client&) = delete;
  /// Stops the allocator if this client spawned it.
  ~client();

  /// The allocator's handle, for actors that want to talk to it directly (requests to it need
  /// <uma/messages/interface.hpp>).
  [[nodiscard]] const managed_allocator_actor& handle() const noexcept;
  /// The supervisor this client talks through (restart, subscribe, supervision counters), or
  /// nullopt when it talks to a bare allocator or has stopped. Neither this nor handle() may be
  /// read while another thread runs stop(); calls may.
  [[nodiscard]] const std::optional<allocator_supervisor_actor>& supervisor() const noexcept;
  /// How long each call waits for its reply (default 60 s); past it the call throws
  /// `error(timeout)`.
  void set_timeout(std::chrono::milliseconds timeout) noexcept { timeout_ = timeout; }

  /// Allocates `count` elements of T. Requests up to `max_block_bytes()` without a stream, with
  /// global attachment and at most page alignment are served by the allocator's block
  /// allocator on the calling thread (memory/block_allocator.hpp: no message; a label is
  /// recorded there for the report); the rest are regions, taken on the calling thread too
  /// (caller_calls::allocate). A request either cannot serve (a slab or a region the quota or
  /// the backend refused) is a request to the allocator, which retries it behind the frees on
  /// their way.
  template <class T>
  [[nodiscard]] ManagedRef<T> allocate(std::size_t count, allocate_options options = {}) {
    if (block_sized(count, sizeof(T), options)) {
      if (options.label.empty()) {
        if (auto ref = from_blocks<T>(count * sizeof(T), [count](block_allocator& b) {
              return b.template allocate_n<T>(count, 0, {});
            }))
          return std::move(*ref);
      } else if (auto ref = from_blocks<T>(count * sizeof(T), [&](block_allocator& b) {
                   return b.template allocate_labelled<T>(count, options.label, 0, {});
                 })) {
        return std::move(*ref);
      }
    }
    allocate_request r{count,
                       sizeof(T),
                       options.alignment > alignof(T) ? options.alignment : alignof(T),
                       options.attach,
                       options.stream,
                       std::move(options.label),
                       options.kind,
                       options.device};
    if (auto ref = allocate_here(r))
      return ref->template as<T>();
    return allocate_by_message(std::move(r)).template as<T>();
  }

  /// The largest request the block allocator serves for this client (0: the fast path is off).
  [[nodiscard]] std::size_t max_block_bytes() const noexcept { return max_block_; }
  /// Sets it (0 turns the fast path off; above the allocator's own limit,
  /// `resource_stack_config::max_pooled_block`, requests are regions). Not thread-safe against
  /// concurrent allocate calls: set it before sharing the client.
  void set_max_block_bytes(std::size_t bytes) noexcept { max_block_ = bytes; }
  [[deprecated("use max_block_bytes()")]] [[nodiscard]] std::size_t cache_max_bytes()
      const noexcept {
    return max_block_;
  }
  [[deprecated("use set_max_block_bytes()")]] void set_cache_max_bytes(std::size_t b) noexcept {
    max_block_ = b;
  }
  [[deprecated("use blocks()->stats()")]] [[nodiscard]] block_stats cache_stats() {
    return blocks()->stats();
  }
  /// The current incarnation's block allocator (one message the first time, and after a
  /// restart); throws the allocator's error (allocator_stopped, ...).
  [[nodiscard]] block_allocator_ref blocks();
  /// The current incarnation's caller calls (messages/caller_calls.hpp; one message the first
  /// time, and after a restart): what prefetch, discard_prefetch, advise, attributes and stats
  /// use before they send a message. Throws as blocks().
  [[nodiscard]] caller_calls_ref calls();

  /// Prefetches `refs` to one location (broadcast) or one per ref.
  op_result prefetch(std::vector<byte_ref> refs, std::vector<location> locations,
                     stream_view stream = {}, completion when = completion::enqueued);
  /// Prefetches one ref.
  template <class T>
  op_result prefetch(const ManagedRef<T>& ref, location loc, stream_view stream = {},
                     completion when = completion::enqueued) {
    return prefetch({erase(ref)}, {loc}, stream, when);
  }
  /// Discards the contents of `refs`.
  op_result discard(std::vector<byte_ref> refs, stream_view stream = {},
                    completion when = completion::enqueued);
  /// Discards `refs` and prefetches them to `locations`.
  op_result discard_prefetch(std::vector<byte_ref> refs, std::vector<location> locations,
                             stream_view stream = {}, completion when = completion::enqueued);
  /// Applies advice to `refs`.
  op_result advise(std::vector<byte_ref> refs, advice what, location where = location::host());
  /// Applies advice to one ref.
  template <class T>
  op_result advise(const ManagedRef<T>& ref, advice what, location where = location::host()) {
    return advise(std::vector<byte_ref>{erase(ref)}, what, where);
  }
  /// Reads advice and last prefetch location of a ref's range.
  template <class T>
  [[nodiscard]] range_attributes attributes(const ManagedRef<T>& ref) {
    return attributes_of(erase(ref));
  }
  /// Whether `loc` (a device, or host) can access the ref's memory.
  template <class T>
  [[nodiscard]] bool can_access(location loc, const ManagedRef<T>& ref) {
    return can_access_of(loc, erase(ref));
  }
  /// What kind of memory `ptr` points to.
  [[nodiscard]] memory_kind kind_of(const void* ptr);
  /// The allocator's counters.
  [[nodiscard]] allocator_stats stats();
  /// The counters once every backend call queued so far (frees included) has run.
  [[nodiscard]] allocator_stats flush();
  /// Gives the block allocator's idle slabs (all blocks free and finished on their streams)
  /// back to the backend; returns their bytes.
  std::uint64_t trim();
  /// The quota in force; non-zero `set_bytes` sets it first (invalid_argument, and no change,
  /// when it is below the live bytes). Through a supervisor the new quota outlives restarts.
  std::uint64_t quota(std::uint64_t set_bytes = 0);
  // -- residency (docs/residency.md) ------------------------------------------------------------

  /// An access plan: the pages of `refs` (each ref's own bytes) are about to be used on `device`
  /// in `mode`; they are placed there (others evicted first when its budget needs it) and held
  /// until done_with. Returns the moves, once the placements were issued on `stream` (none: the
  /// allocator's lanes' own streams) or, with `when` complete, once they are done.
  residency_result will_access(std::vector<byte_ref> refs, int device, access_mode mode,
                               residency_policy policy = residency_policy::automatic,
                               stream_view stream = {}, completion when = completion::enqueued);
  /// will_access without waiting: the plan is sent now and `get()` waits for its reply. A
  /// pipeline sends step i + 1's plan, runs step i, then gets the plan: the data of the next
  /// step moves while this one runs.
  [[nodiscard]] pending_plan will_access_async(
      std::vector<byte_ref> refs, int device, access_mode mode,
      residency_policy policy = residency_policy::automatic, stream_view stream = {},
      completion when = completion::enqueued);
  /// The general forms: every field of the plan (its tenant among them) in the request.
  residency_result will_access(access_plan_request plan);
  [[nodiscard]] pending_plan will_access_async(access_plan_request plan);
  /// The plans on `refs` are over: their regions may be evicted again. Returns the holds ended.
  std::uint64_t done_with(std::vector<byte_ref> refs);
  /// The contents of `refs` are no longer needed: discarded, nothing moves back.
  residency_result dead(std::vector<byte_ref> refs);
  /// done_with by address range (access_plan_request::ranges; docs/residency.md "Ranges").
  std::uint64_t done_with(std::vector<address_range> ranges);
  /// dead by address range.
  residency_result dead(std::vector<address_range> ranges);
  /// The budget of `device` in force; non-zero `set_bytes` sets it first. One lowered below what
  /// is resident evicts the least recently used extents no plan holds down to it (contents
  /// kept) before this returns; held extents stay, even above it (docs/residency.md). Through a
  /// supervisor it outlives restarts.
  std::uint64_t device_budget(int device, std::uint64_t set_bytes = 0);
  /// Sets `tenant`'s budget on `device` (docs/residency.md "Tenants"): 0 removes it, else at
  /// most the device's memory. Returns the budget now in force. Through a supervisor it
  /// outlives restarts.
  std::uint64_t tenant_budget(std::string tenant, int device, std::uint64_t bytes);
  /// Each device's residency account and the ledger.
  [[nodiscard]] residency_report residency();

  /// The outstanding-allocation report.
  [[nodiscard]] std::vector<region_info> regions();
  /// Every region (policy, advice, last prefetch included), the counters and the event
  /// history; throws error(allocator_stopped) once the allocator has stopped.
  [[nodiscard]] allocator_snapshot snapshot();
  /// Stops the allocator (user_shutdown; through a supervisor: the supervisor and its current
  /// incarnation) and waits until its post_stop has finished. Returns what that post_stop did
  /// when this client spawned the allocator; nullopt for one it was given by handle, whose
  /// post_stop it cannot observe. Later calls return the same report.
  std::optional<final_report> stop();

  /// A typed ref seen as the untyped ref messages carry.
  template <class T>
  [[nodiscard]] static byte_ref erase(const ManagedRef<T>& ref) {
    return ref.template as<std::byte>();
  }

 private:
  /// What the client holds behind this header (actors/client.cpp): the handles, the call
  /// channel, the stop's report, what it was handed of each incarnation.
  struct state;
  /// Sends the request made of `xs` through the request channel, waits at most the timeout and
  /// returns the reply; its error thrown as uma::error.
  template <class R, class... Ts>
  R send_request(Ts&&... xs);
  /// What `served(calls, deadline)` answered on this thread (docs/design.md "Calls on the
  /// caller's thread"), or nullopt when the request must be a message: a plan sent ahead is not
  /// answered yet (it reaches the actor first), or the calls declined. A restart met on the way
  /// is retried once with the new incarnation's calls.
  template <class R, class Served>
  [[nodiscard]] std::optional<R> on_caller(Served served);
  /// `now` when set, else the allocator's answer to `atom` (one message), kept in `held` and
  /// made `now`.
  template <class T, class Held, class Atom>
  [[nodiscard]] std::shared_ptr<T> current(std::atomic<T*>& now, Held& held, Atom atom);
  [[nodiscard]] byte_ref allocate_by_message(allocate_request r);
  [[nodiscard]] bool can_access_of(location loc, const byte_ref& ref);
  [[nodiscard]] range_attributes attributes_of(const byte_ref& ref);
  /// A region for `r` on this thread (caller_calls::allocate), or nullopt: a message then.
  [[nodiscard]] std::optional<byte_ref> allocate_here(const allocate_request& r);

  [[nodiscard]] bool block_sized(std::size_t count, std::size_t size,
                                 const allocate_options& o) const noexcept {
    // A stream goes to the allocator, which validates it (the host backend has none; a
    // capturing CUDA stream is refused).
    return count != 0 && count <= max_block_ / size && o.alignment <= block_alignment &&
           o.attach == attach_flag::global && o.stream.handle == nullptr &&
           o.kind == memory_kind::cuda_managed;
  }
  /// What `take` got from the block allocator, or nullopt when it does not serve `bytes` (above
  /// the allocator's limit: a region) or its slab was refused for memory that may be on its way
  /// back (the allocator then retries the request behind the frees). Every other error is
  /// thrown as it came: a fatal one has ended the incarnation already.
  template <class T, class Take>
  [[nodiscard]] std::optional<ManagedRef<T>> from_blocks(std::size_t bytes, Take take) {
    auto* b = blocks_now_.load(std::memory_order_acquire);
    for (;;) {
      try {
        auto& from = b != nullptr ? *b : *blocks();
        if (!from.serves(bytes))
          return std::nullopt;
        return take(from);
      } catch (const error& e) {
        if (!after_block_refusal(e, b))
          return std::nullopt;
        b = nullptr;  // a restart: the new incarnation's
      }
    }
  }
  /// Called in from_blocks' handler with the error of the block allocator `b` (null: fetched):
  /// true to try the new incarnation's (a restart met, `now` cleared), false to hand the request
  /// to the allocator (retried_on_lane); else it rethrows.
  [[nodiscard]] bool after_block_refusal(const error& e, block_allocator* b);

  /// Blocks are page-aligned (the host's smallest page; CUDA's allocations are at least that).
  static constexpr std::size_t block_alignment = 4096;

  const std::unique_ptr<state> state_;
  /// The current incarnation's block allocator and caller calls, read without a lock (`state_`
  /// keeps every one this client met, so that neither dangles).
  std::atomic<block_allocator*> blocks_now_{nullptr};
  std::atomic<caller_calls*> calls_now_{nullptr};
  std::chrono::milliseconds timeout_{60000};
  std::size_t max_block_ = std::size_t{16} << 20;
};

}  // namespace uma
