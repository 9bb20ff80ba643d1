#include "actors/managed_allocator.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <functional>
#include <unordered_map>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/request_checks.hpp"
#include "memory/advice_ops.hpp"
#include "memory/coalesce.hpp"
#include "memory/location_rules.hpp"
#include "memory/pool.hpp"
#include "memory/region_table.hpp"
#include "messages/error_category.hpp"
#include "sys/detail/format.hpp"
#include "sys/work_queue.hpp"

namespace uma {

namespace {

/// The allocator's own interface: the public one plus completions of off-loop backend work.
using allocator_impl = managed_allocator_actor::extend<
    caf::reacts_to<job_done_atom, std::uint64_t, caf::message, caf::error, bool>>;

/// A completion waiting for its stream: what the host callback sends back.
struct stream_done {
  allocator_impl actor;
  std::uint64_t ticket;
  caf::message payload;
};

void on_stream_done(void* arg) {
  // Runs on a CUDA runtime thread: sends a message, calls no CUDA API.
  std::unique_ptr<stream_done> done(static_cast<stream_done*>(arg));
  caf::anon_send(done->actor, job_done_atom_v, done->ticket, std::move(done->payload), caf::error{},
                 false);
}

class managed_allocator final : public allocator_impl::base {
 public:
  managed_allocator(caf::actor_config& cfg, allocator_config config,
                    std::shared_ptr<backend> backend)
      : allocator_impl::base(cfg),
        config_(std::move(config)),
        backend_(std::move(backend)),
        control_(std::make_shared<detail::control_block>(config_.generation, backend_)),
        quota_(config_.quota_bytes != 0 ? config_.quota_bytes : backend_->default_quota()) {
    stats_.backend = std::string(to_string(backend_->kind()));
    stats_.generation = config_.generation;
    stats_.quota_bytes = quota_;
    if (config_.policy == allocation_policy::pool)
      pool_ = std::make_unique<block_pool>(
          *backend_, config_.slab_bytes, config_.max_pooled_block, attach_flag::global, quota_,
          [this](void* base, std::size_t bytes) {
            worker_.post([b = backend_, base, bytes] { b->free_managed(base, bytes); });
          });
    control_->set_waker([addr = address()] {
      if (auto hdl = caf::actor_cast<caf::strong_actor_ptr>(addr))
        caf::anon_send(caf::actor_cast<managed_allocator_actor>(hdl), release_atom_v);
    });
  }

  behavior_type make_behavior() override {
    return {
        [this](allocate_atom, const allocate_request& r) -> caf::result<byte_ref> {
          return guarded<byte_ref>([&] { return allocate(r); });
        },
        [this](prefetch_atom, const prefetch_request& r) -> caf::result<op_result> {
          return guarded<op_result>([&] { return prefetch(r, false); });
        },
        [this](discard_prefetch_atom, const prefetch_request& r) -> caf::result<op_result> {
          return guarded<op_result>([&] { return prefetch(r, true); });
        },
        [this](discard_atom, const discard_request& r) -> caf::result<op_result> {
          return guarded<op_result>([&] { return discard(r); });
        },
        [this](advise_atom, const advise_request& r) -> caf::result<op_result> {
          return guarded<op_result>([&] { return advise(r); });
        },
        [this](attributes_atom, const byte_ref& ref) -> caf::result<range_attributes> {
          return guarded<range_attributes>([&] {
            check_refs({&ref, 1}, "attributes");
            return offload<range_attributes>(
                [b = backend_, ref] { return b->attributes(ref.range()); }, {},
                completion::enqueued, [](range_attributes&) {});
          });
        },
        [this](stats_atom) -> allocator_stats { return current_stats(); },
        [this](memory_kind_atom, std::uintptr_t address) -> caf::result<memory_kind> {
          return guarded<memory_kind>(
              [&] { return backend_->kind_of(reinterpret_cast<const void*>(address)); });
        },
        [this](can_access_atom, const location& loc, const byte_ref& ref) -> caf::result<bool> {
          return guarded<bool>([&] { return can_access(loc, ref); });
        },
        [this](regions_atom) -> std::vector<region_info> {
          return table_.report(config_.generation);
        },
        [this](flush_atom) -> caf::result<allocator_stats> {
          return offload<allocator_stats>([] { return allocator_stats{}; }, {},
                                          completion::enqueued,
                                          [this](allocator_stats& s) { s = current_stats(); });
        },
        [this](release_atom) { drain_releases(); },
        [this](trim_atom) -> std::uint64_t { return pool_ ? pool_->trim() : 0; },
        [this](quota_atom, std::uint64_t bytes) -> caf::result<std::uint64_t> {
          return guarded<std::uint64_t>([&] {
            if (bytes != 0 && bytes < stats_.live_bytes)
              raise(errc::invalid_argument, "quota: " + detail::bytes(bytes) +
                                                " is below the live bytes (" +
                                                detail::bytes(stats_.live_bytes) + ")");
            if (bytes != 0)
              quota_ = stats_.quota_bytes = bytes;  // a pool keeps its slab limit from the start
            return quota_;
          });
        },
        [this](job_done_atom, std::uint64_t ticket, caf::message& payload, caf::error& err,
               bool fatal) {
          auto it = pending_.find(ticket);
          if (it == pending_.end())
            return;
          auto finish = std::move(it->second);
          pending_.erase(it);
          auto reason = fatal ? err : caf::error{};
          finish(payload, err);
          if (fatal)
            quit(std::move(reason));  // the supervisor decides what comes next
        },
    };
  }

  void on_exit() override {
    // on_exit also runs from on_destroy (no handle left), where the execution unit is stale:
    // replies delivered by post_stop go through the scheduler's shared queue.
    context(nullptr);
    post_stop();
    allocator_impl::base::on_exit();
  }

 private:
  // -- request handlers (throw uma::error; `guarded` turns it into the reply) -----------------

  byte_ref allocate(const allocate_request& r) {
    if (r.count == 0 || r.element_size == 0)
      raise(errc::invalid_argument, "allocate: zero-size request (" + std::to_string(r.count) +
                                        " elements of " + std::to_string(r.element_size) +
                                        " bytes); uma hands out no empty regions");
    if (r.count > SIZE_MAX / r.element_size)
      raise(errc::overflow, "allocate: " + std::to_string(r.count) + " elements of " +
                                std::to_string(r.element_size) + " bytes overflow size_t");
    const std::size_t bytes = r.count * r.element_size;
    const std::size_t guaranteed = backend_->guaranteed_alignment();
    const std::size_t alignment = r.alignment == 0 ? guaranteed : r.alignment;
    if (!std::has_single_bit(alignment))
      raise(errc::invalid_argument,
            "allocate: alignment " + std::to_string(alignment) + " is not a power of two");
    const std::size_t padding = alignment > guaranteed ? alignment - guaranteed : 0;
    if (bytes > SIZE_MAX - padding)
      raise(errc::overflow, "allocate: " + detail::bytes(bytes) + " plus " +
                                detail::bytes(padding) + " of alignment padding overflow size_t");
    const bool pooled = pool_ && r.attach == attach_flag::global && pool_->serves(bytes, alignment);
    // A pooled block is page-rounded; a direct region carries its alignment padding.
    const std::size_t backend_bytes =
        pooled ? (bytes + pool_->page() - 1) / pool_->page() * pool_->page() : bytes + padding;
    if (backend_bytes > quota_ || stats_.live_bytes > quota_ - backend_bytes)
      raise(errc::quota_exceeded, "allocate: " + detail::bytes(backend_bytes) +
                                      " would bring live bytes to " +
                                      std::to_string(stats_.live_bytes + backend_bytes) +
                                      ", over the quota of " + detail::bytes(quota_));
    if (r.stream.handle != nullptr && backend_->is_capturing(r.stream))
      raise(errc::capture_in_progress, "allocate: stream " + detail::hex(r.stream.handle) +
                                           " is capturing a graph; managed memory cannot be "
                                           "allocated inside a capture");

    detail::region* reg = pooled ? allocate_block(bytes, r.label) : nullptr;
    if (reg == nullptr) {
      void* base = backend_->allocate_managed(backend_bytes, r.attach);
      try {
        auto* data = static_cast<std::byte*>(base);
        data += (alignment - reinterpret_cast<std::uintptr_t>(data) % alignment) % alignment;
        reg = new detail::region(control_, next_id_, base, data, bytes, backend_bytes);
        table_.insert(reg, r.label, r.attach);
      } catch (...) {
        delete reg;
        backend_->free_managed(base, backend_bytes);
        throw;
      }
    }
    ++next_id_;
    ++stats_.allocations;
    ++stats_.live_regions;
    stats_.live_bytes += backend_bytes;
    stats_.total_bytes_allocated += backend_bytes;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
    detail::adopt_first_ref(reg);  // the reply's count; the table keeps the initial one
    return byte_ref::adopt(reg, 0, bytes);
  }

  /// A pooled region: a block carved from a slab (no backend call unless the pool grows).
  detail::region* allocate_block(std::size_t bytes, const std::string& label) {
    const auto blk = pool_->allocate(bytes);
    detail::region* reg = nullptr;
    try {
      reg = new detail::region(control_, next_id_, blk.data, blk.data, bytes, blk.bytes, blk.slab,
                               blk.offset);
      table_.insert(reg, label, attach_flag::global);
    } catch (...) {
      delete reg;
      pool_->deallocate(blk);
      throw;
    }
    return reg;
  }

  /// The ranges of `refs`, each keyed by the allocation it lies in, merged where adjacent.
  coalesced_ranges coalesced(std::span<const byte_ref> refs, std::span<const location> locations) {
    std::vector<keyed_range> keyed;
    keyed.reserve(refs.size());
    for (std::size_t i = 0; i < refs.size(); ++i) {
      const auto* r = refs[i].region_record();
      const std::uint64_t allocation = r->pooled() ? r->slab : (std::uint64_t{1} << 32) + r->id;
      keyed.push_back(
          {allocation, refs[i].range(),
           locations.empty() ? location::host() : locations[locations.size() == 1 ? 0 : i]});
    }
    auto out = coalesce(std::move(keyed));
    stats_.ranges_coalesced += refs.size() - out.ranges.size();
    return out;
  }

  caf::typed_response_promise<op_result> prefetch(const prefetch_request& r, bool discard_first) {
    const char* op = discard_first ? "discard_prefetch" : "prefetch";
    check_refs(r.refs, op);
    if (r.locations.empty() || (r.locations.size() != 1 && r.locations.size() != r.refs.size()))
      raise(errc::invalid_argument,
            std::string(op) + ": " + std::to_string(r.refs.size()) + " refs but " +
                std::to_string(r.locations.size()) +
                " locations (give one location to broadcast, or one per ref)");
    for (const auto& loc : r.locations)
      validate_location(*backend_, location_use::prefetch, loc);
    check_stream(r.stream, op);
    auto summary = summarize(ranges_of(r.refs), r.reply_when);
    auto merged = coalesced(r.refs, r.locations);
    summary.backend_ranges = merged.ranges.size();
    return offload<op_result>(
        [b = backend_, merged = std::move(merged), stream = r.stream, keep = r.refs, discard_first,
         summary] {
          if (discard_first)
            b->discard_prefetch(merged.ranges, merged.locations, stream);
          else
            b->prefetch(merged.ranges, merged.locations, stream);
          return summary;
        },
        r.stream, r.reply_when,
        [this, discard_first](op_result& res) {
          stats_.prefetches += res.ranges;
          stats_.prefetch_bytes += res.bytes;
          if (discard_first) {
            stats_.discards += res.ranges;
            stats_.discard_bytes += res.bytes;
          }
        });
  }

  caf::typed_response_promise<op_result> discard(const discard_request& r) {
    check_refs(r.refs, "discard");
    check_stream(r.stream, "discard");
    auto summary = summarize(ranges_of(r.refs), r.reply_when);
    auto merged = coalesced(r.refs, {});
    summary.backend_ranges = merged.ranges.size();
    return offload<op_result>(
        [b = backend_, ranges = std::move(merged.ranges), stream = r.stream, keep = r.refs,
         summary] {
          b->discard(ranges, stream);
          return summary;
        },
        r.stream, r.reply_when,
        [this](op_result& res) {
          stats_.discards += res.ranges;
          stats_.discard_bytes += res.bytes;
        });
  }

  /// Advice the allocator knows to change nothing is skipped (tracked per whole region).
  caf::result<op_result> advise(const advise_request& r) {
    check_refs(r.refs, "advise");
    validate_advice(*backend_, r.what, r.where);
    auto summary = summarize(ranges_of(r.refs), completion::enqueued);
    std::vector<byte_range> todo;
    std::vector<std::uint64_t> touched;
    for (const auto& ref : r.refs) {
      auto* entry = table_.find(ref.id());
      const bool whole = ref.byte_offset() == 0 && ref.bytes() == ref.region_record()->bytes;
      if (whole && entry->advice.unchanged_by(r.what, r.where)) {
        ++stats_.advice_elided;
        continue;
      }
      if (whole)
        entry->advice.apply(r.what, r.where);
      else
        entry->advice.known = false;  // part of the region: its state is no longer one value
      todo.push_back(ref.range());
      touched.push_back(ref.id());
    }
    summary.backend_ranges = todo.size();
    if (todo.empty()) {
      stats_.advises += summary.ranges;
      return summary;
    }
    return offload<op_result>(
        [b = backend_, todo = std::move(todo), what = r.what, where = r.where, keep = r.refs,
         summary] {
          apply_advice_whole(*b, todo, what, where);
          return summary;
        },
        {}, completion::enqueued, [this](op_result& res) { stats_.advises += res.ranges; },
        [this, touched = std::move(touched)] {
          for (auto id : touched)  // the runtime refused: what is in force is not known
            if (auto* e = table_.find(id))
              e->advice.known = false;
        });
  }

  bool can_access(const location& loc, const byte_ref& ref) {
    check_refs({&ref, 1}, "can_access");
    validate_location(*backend_, location_use::can_access, loc);
    if (!loc.is_device())
      return true;
    const auto& caps = backend_->capabilities(loc.id);
    const auto* entry = table_.find(ref.id());
    const bool attached_global = entry && entry->attach == attach_flag::global;
    return caps.managed_memory && (attached_global || caps.concurrent_managed_access);
  }

  // -- validation (actors/request_checks) -------------------------------------------------------

  void check_refs(std::span<const byte_ref> refs, const char* op) {
    uma::check_refs(refs, op, *control_, stats_.inert_refusals);
  }
  void check_stream(stream_view stream, const char* op) {
    uma::check_stream(*backend_, stream, op);
  }

  // -- off-loop work -----------------------------------------------------------------------------

  /// Runs `job` on the worker thread and replies with its result from the actor thread, once
  /// the call returned (`enqueued`) or once `stream` reached it (`complete`). `on_success` runs
  /// on the actor thread before the reply (stats; may rewrite the reply).
  template <class T, class Job, class OnSuccess>
  caf::typed_response_promise<T> offload(Job job, stream_view stream, completion when,
                                         OnSuccess on_success,
                                         std::function<void()> on_failure = {}) {
    auto rp = make_response_promise<T>();
    const auto ticket = ++next_ticket_;
    pending_.emplace(
        ticket, [this, rp, on_success, on_failure](caf::message& payload, caf::error& err) mutable {
          if (err) {
            if (on_failure)
              on_failure();
            count_failure(err);
            rp.deliver(std::move(err));
            return;
          }
          T value = payload.get_as<T>(0);
          on_success(value);
          rp.deliver(std::move(value));
        });
    worker_.post([job = std::move(job), hdl = caf::actor_cast<allocator_impl>(this), ticket,
                  b = backend_, stream, when]() mutable {
      caf::message payload;
      caf::error err;
      bool fatal = false;
      try {
        payload = caf::make_message(job());
        if (when == completion::complete) {
          auto done = std::make_unique<stream_done>(stream_done{hdl, ticket, payload});
          b->launch_host_func(stream, &on_stream_done, done.get());
          done.release();  // owned by the callback now
          return;
        }
      } catch (const error& e) {
        err = make_caf_error(e);
        fatal = is_fatal(e);
      } catch (const std::exception& e) {
        err = make_caf_error(errc::backend_error, e.what());
      }
      caf::anon_send(hdl, job_done_atom_v, ticket, std::move(payload), std::move(err), fatal);
    });
    return rp;
  }

  // -- releases and stop -------------------------------------------------------------------------

  void drain_releases() {
    for (const auto id : control_->take_releases()) {
      auto* entry = table_.find(id);
      if (entry == nullptr)
        continue;
      auto* r = entry->region;
      if (r->refs.load(std::memory_order_acquire) != 0)
        continue;  // re-shared since
      ++stats_.releases;
      --stats_.live_regions;
      stats_.live_bytes -= r->backend_bytes;
      if (r->pooled()) {
        // The block's pages keep their advice: take it back before anyone else gets them (the
        // worker is FIFO, so the reset runs before any request of the block's next owner).
        if (!entry->advice.is_default())
          worker_.post(
              [b = backend_, range = byte_range{r->data, r->backend_bytes}, state = entry->advice,
               devices = backend_->device_count()] { reset_advice(*b, range, state, devices); });
        table_.erase(id);
        pool_->deallocate({r->slab, r->slab_offset, r->backend_bytes, r->data});
        detail::drop_table_ref(r);
        continue;
      }
      table_.erase(id);
      // cudaFree synchronizes the device: never on the actor's loop.
      worker_.post([b = backend_, r] {
        b->free_managed(r->base, r->backend_bytes);
        detail::drop_table_ref(r);
      });
    }
  }

  void post_stop() noexcept {
    const auto start = std::chrono::steady_clock::now();
    control_->begin_stop();
    stop_report report;
    try {
      report.pins_drained = control_->pins() == 0 || control_->wait_for_pins(config_.drain_timeout);
    } catch (...) {
      report.pins_drained = false;
    }
    worker_.drain_and_stop();  // queued prefetches, advice and frees run out first
    try {
      backend_->synchronize();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "uma: post_stop synchronize failed: %s\n", e.what());
    }
    std::uint64_t leaked_backend_bytes = 0;
    std::vector<std::uint32_t> pinned_slabs;  // a slab with a pinned block is leaked whole
    for (auto& [id, e] : table_.take_all()) {
      auto* r = e.region;
      // After a successful drain no pin can be held: a non-zero region count is a pin attempt
      // that is backing off (try_pin raises it before it learns of the stop). Only a drain that
      // timed out leaves real readers behind.
      if (!report.pins_drained && r->pins.load(std::memory_order_seq_cst) > 0) {
        if (r->pooled())
          pinned_slabs.push_back(r->slab);
        ++report.regions_leaked;
        report.bytes_leaked += r->bytes;
        leaked_backend_bytes += r->backend_bytes;
        report.leaked_ids.push_back(id);
        std::fprintf(stderr,
                     "uma: region %llu ('%s', %zu bytes, generation %llu) is still pinned after "
                     "the %lld ms drain timeout: leaked on purpose, never freed under a reader\n",
                     static_cast<unsigned long long>(id), e.label.c_str(), r->bytes,
                     static_cast<unsigned long long>(config_.generation),
                     static_cast<long long>(config_.drain_timeout.count()));
      } else {
        if (!r->pooled())
          backend_->free_managed(r->base, r->backend_bytes);
        ++report.regions_freed;
        report.bytes_freed += r->bytes;
      }
      detail::drop_table_ref(r);
    }
    if (pool_)
      pool_->release_all(pinned_slabs);  // the worker has stopped: frees run here, in order
    auto pending = std::exchange(pending_, {});
    for (auto& [ticket, finish] : pending) {
      caf::message none;
      caf::error err = make_caf_error(errc::allocator_stopped,
                                      "the allocator stopped before the request completed");
      finish(none, err);
    }
    report.duration = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - start);
    // What the incarnation holds after post_stop: only what it had to leak.
    stats_.releases += report.regions_freed;
    stats_.live_regions = report.regions_leaked;
    stats_.live_bytes = leaked_backend_bytes;
    if (config_.on_stop) {
      try {
        config_.on_stop(current_stats(), report);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "uma: on_stop callback failed: %s\n", e.what());
      }
    }
    control_->finish_stop(std::move(report));
  }

  // -- helpers -----------------------------------------------------------------------------------

  /// Runs a handler body; a thrown uma::error becomes the error reply (and a failure count).
  template <class R, class F>
  caf::result<R> guarded(F&& f) {
    try {
      return caf::result<R>(f());
    } catch (const error& e) {
      ++stats_.failures[static_cast<std::size_t>(e.code())];
      if (!is_fatal(e))
        return make_caf_error(e);
      // Reply first, then end this incarnation with the error as exit reason.
      auto rp = make_response_promise<R>();
      rp.deliver(make_caf_error(e));
      quit(make_caf_error(e));
      return rp;
    } catch (const std::bad_alloc&) {
      ++stats_.failures[static_cast<std::size_t>(errc::out_of_memory)];
      return make_caf_error(errc::out_of_memory, "host memory exhausted while serving a request");
    }
  }

  void count_failure(const caf::error& err) {
    const auto code = err.category() == error_category && err.code() < errc_slots
                          ? err.code()
                          : static_cast<std::uint8_t>(errc::backend_error);
    ++stats_.failures[code];
  }

  allocator_stats current_stats() const {
    auto s = stats_;
    s.pending_jobs = worker_.pending();
    s.reserved_bytes = s.live_bytes;
    if (pool_) {
      const auto p = pool_->stats();
      s.reserved_bytes = p.reserved_bytes + (s.live_bytes - p.used_bytes);  // slabs + direct
      s.pool_slabs = p.slabs;
      s.fragmentation = p.fragmentation();
    }
    return s;
  }

  allocator_config config_;
  std::shared_ptr<backend> backend_;
  std::shared_ptr<detail::control_block> control_;
  std::uint64_t quota_;
  region_table table_;
  allocator_stats stats_;
  std::uint64_t next_id_ = 1;
  std::uint64_t next_ticket_ = 0;
  std::unordered_map<std::uint64_t, std::function<void(caf::message&, caf::error&)>> pending_;
  std::unique_ptr<block_pool> pool_;  // pool policy only
  work_queue worker_;                 // last: joined first on destruction
};

}  // namespace

managed_allocator_actor spawn_allocator(caf::actor_system& sys, allocator_config config) {
  auto b = config.backend ? config.backend : make_backend(config.choice);
  if (config.detached)
    return sys.spawn<managed_allocator, caf::detached>(std::move(config), b);
  return sys.spawn<managed_allocator>(std::move(config), b);
}

}  // namespace uma
