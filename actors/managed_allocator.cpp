#include "actors/managed_allocator.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <deque>
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
#include "sys/worker_lanes.hpp"

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
            lanes_.post(worker_lanes::general,
                        [b = backend_, base, bytes] { b->free_managed(base, bytes); });
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
                worker_lanes::general, [b = backend_, ref] { return b->attributes(ref.range()); },
                {}, completion::enqueued, [](range_attributes&) {});
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
          // Once every lane has run what was queued before: a barrier across the lanes.
          auto rp = make_response_promise<allocator_stats>();
          const auto ticket = ++next_ticket_;
          pending_.emplace(ticket, [this, rp](caf::message&, caf::error&) mutable {
            rp.deliver(current_stats());
          });
          lanes_.barrier([hdl = caf::actor_cast<allocator_impl>(this), ticket] {
            caf::anon_send(hdl, job_done_atom_v, ticket, caf::message{}, caf::error{}, false);
          });
          return rp;
        },
        [this](release_atom) { drain_releases(); },
        [this](trim_atom) -> std::uint64_t { return pool_ ? pool_->trim() : 0; },
        [this](lease_atom, const lease_request& r) -> caf::result<block_cache> {
          return guarded<block_cache>([&] { return lease(r); });
        },
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

  /// A validated allocation: what to ask for, and where from.
  struct alloc_plan {
    std::size_t bytes = 0;          ///< what the user asked for
    std::size_t alignment = 0;      ///< of the first byte the user sees
    std::size_t backend_bytes = 0;  ///< a pooled block's page-rounded size, or bytes + padding
    bool pooled = false;
    attach_flag attach = attach_flag::global;
    std::string label;
  };

  /// Completion of an allocation that had to wait for the pool to grow.
  using alloc_done = std::function<void(caf::expected<byte_ref>)>;

  /// An allocation parked until the worker has added a slab.
  struct parked_alloc {
    alloc_plan plan;
    alloc_done done;
    bool retried = false;  ///< the one retry after an out-of-memory growth was used
  };

  caf::result<byte_ref> allocate(const allocate_request& r) {
    auto plan = plan_allocation(r);
    if (auto ref = try_allocate_now(plan))
      return std::move(*ref);
    auto rp = make_response_promise<byte_ref>();
    park(std::move(plan), [rp](caf::expected<byte_ref> x) mutable {
      if (x)
        rp.deliver(std::move(*x));
      else
        rp.deliver(std::move(x.error()));
    });
    return rp;
  }

  /// Every check of an allocate request, before anything changes.
  alloc_plan plan_allocation(const allocate_request& r) {
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
    check_quota(backend_bytes);
    if (r.stream.handle != nullptr && backend_->is_capturing(r.stream))
      raise(errc::capture_in_progress, "allocate: stream " + detail::hex(r.stream.handle) +
                                           " is capturing a graph; managed memory cannot be "
                                           "allocated inside a capture");
    return {bytes, alignment, backend_bytes, pooled, r.attach, r.label};
  }

  void check_quota(std::size_t backend_bytes) const {
    if (backend_bytes > quota_ || stats_.live_bytes > quota_ - backend_bytes)
      raise(errc::quota_exceeded, "allocate: " + detail::bytes(backend_bytes) +
                                      " would bring live bytes to " +
                                      std::to_string(stats_.live_bytes + backend_bytes) +
                                      ", over the quota of " + detail::bytes(quota_));
  }

  /// The region now, or nullopt when the pool has no room (a slab must be added first). A
  /// direct region is one backend call on the actor's thread: what `direct` means.
  std::optional<byte_ref> try_allocate_now(const alloc_plan& p) {
    detail::region* reg = nullptr;
    if (p.pooled) {
      const auto blk = pool_->try_allocate(p.bytes);
      if (!blk)
        return std::nullopt;
      try {
        reg = new detail::region(control_, next_id_, blk->data, blk->data, p.bytes, blk->bytes,
                                 blk->slab, blk->offset);
        table_.insert(reg, p.label, attach_flag::global);
      } catch (...) {
        delete reg;
        pool_->deallocate(*blk);
        throw;
      }
    } else {
      void* base = backend_->allocate_managed(p.backend_bytes, p.attach);
      try {
        auto* data = static_cast<std::byte*>(base);
        data += (p.alignment - reinterpret_cast<std::uintptr_t>(data) % p.alignment) % p.alignment;
        reg = new detail::region(control_, next_id_, base, data, p.bytes, p.backend_bytes);
        table_.insert(reg, p.label, p.attach);
      } catch (...) {
        delete reg;
        backend_->free_managed(base, p.backend_bytes);
        throw;
      }
    }
    ++next_id_;
    ++stats_.allocations;
    ++stats_.live_regions;
    stats_.live_bytes += p.backend_bytes;
    stats_.total_bytes_allocated += p.backend_bytes;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.live_bytes);
    detail::adopt_first_ref(reg);  // the reply's count; the table keeps the initial one
    return byte_ref::adopt(reg, 0, p.bytes);
  }

  // -- pool growth off the actor's loop -----------------------------------------------------------

  void park(alloc_plan plan, alloc_done done) {
    parked_.push_back({std::move(plan), std::move(done), false});
    grow_pool();
  }

  /// Fails the oldest parked allocation with `err`.
  void fail_parked_head(caf::error err) {
    count_failure(err);
    auto item = std::move(parked_.front());
    parked_.pop_front();
    item.done(std::move(err));
  }

  /// Starts one slab growth on the general lane for the oldest parked allocation (one growth
  /// at a time; the slab lands in `growth_` and comes back with a job_done).
  void grow_pool() {
    while (!growing_ && !parked_.empty()) {
      std::size_t slab = 0;
      try {
        slab = pool_->growth_for(parked_.front().plan.bytes);
      } catch (const error& e) {
        if (e.code() == errc::quota_exceeded && pool_->trim() > 0)
          continue;  // cached empty slabs went back: there may be room now
        fail_parked_head(make_caf_error(e));
        continue;
      }
      growing_ = true;
      post_job(
          worker_lanes::general,
          [b = backend_, slot = growth_, slab] {
            slot->base.store(b->allocate_managed(slab, attach_flag::global));
            slot->bytes = slab;
            return true;
          },
          {}, completion::enqueued,
          [this](caf::message&, caf::error& err) { on_slab(std::move(err)); });
      return;
    }
  }

  void on_slab(caf::error err) {
    growing_ = false;
    if (parked_.empty())
      return;  // post_stop: it answered the parked requests and frees a late slab itself
    if (err) {
      // A fatal error ends the incarnation right after this; post_stop fails the rest (and
      // frees a slab that a growth started here may still add).
      if (err.category() == error_category &&
          err.code() == static_cast<std::uint8_t>(errc::out_of_memory) &&
          !parked_.front().retried && pool_->trim() > 0) {
        parked_.front().retried = true;  // cached slabs went back: one retry
        grow_pool();
        return;
      }
      fail_parked_head(std::move(err));
      serve_parked();
      return;
    }
    auto* base = static_cast<std::byte*>(growth_->base.exchange(nullptr));
    try {
      pool_->add_slab(base, growth_->bytes);
    } catch (const std::bad_alloc&) {
      lanes_.post(worker_lanes::general,
                  [b = backend_, base, bytes = growth_->bytes] { b->free_managed(base, bytes); });
      fail_parked_head(
          make_caf_error(errc::out_of_memory, "host memory exhausted growing the pool"));
    }
    serve_parked();
  }

  /// Serves parked allocations in order while the pool has room; grows it for the first that
  /// does not fit.
  void serve_parked() {
    while (!parked_.empty() && !growing_) {
      std::optional<byte_ref> ref;
      try {
        check_quota(parked_.front().plan.backend_bytes);  // live bytes moved meanwhile
        ref = try_allocate_now(parked_.front().plan);
      } catch (const error& e) {
        fail_parked_head(make_caf_error(e));
        continue;
      } catch (const std::bad_alloc&) {
        fail_parked_head(make_caf_error(errc::out_of_memory, "host memory exhausted"));
        continue;
      }
      if (!ref) {
        grow_pool();
        return;
      }
      auto item = std::move(parked_.front());
      parked_.pop_front();
      item.done(std::move(*ref));
    }
  }

  /// The page size blocks are rounded to (advice and prefetch act on whole pages).
  std::size_t page_bytes() const noexcept {
    return pool_ ? pool_->page()
                 : std::max<std::size_t>(backend_->guaranteed_alignment(), std::size_t{4096});
  }

  /// A client-side block cache: one page-aligned backing region (allocated like any other, so
  /// quota, pool and report apply), carved into page-rounded blocks with ids of their own.
  caf::result<block_cache> lease(const lease_request& r) {
    if (r.block_bytes == 0 || r.blocks == 0)
      raise(errc::invalid_argument, "lease: zero-size request (" + std::to_string(r.blocks) +
                                        " blocks of " + std::to_string(r.block_bytes) +
                                        " bytes); a lease needs at least one non-empty block");
    if (r.blocks >= detail::lease_state::none)
      raise(errc::invalid_argument, "lease: " + std::to_string(r.blocks) +
                                        " blocks; a lease holds at most " +
                                        std::to_string(detail::lease_state::none - 1));
    const std::size_t page = page_bytes();
    if (r.block_bytes > SIZE_MAX - (page - 1) ||
        r.blocks > SIZE_MAX / ((r.block_bytes + page - 1) / page * page))
      raise(errc::overflow, "lease: " + std::to_string(r.blocks) + " blocks of " +
                                std::to_string(r.block_bytes) +
                                " bytes (page-rounded) overflow size_t");
    const std::size_t block = (r.block_bytes + page - 1) / page * page;
    allocate_request backing{block * r.blocks, 1, page, attach_flag::global, {}, {}};
    backing.label = "lease: " + std::to_string(r.blocks) + " x " + detail::bytes(block) +
                    (r.label.empty() ? "" : " " + r.label);
    auto plan = plan_allocation(backing);
    const auto blocks = static_cast<std::uint32_t>(r.blocks);
    if (auto ref = try_allocate_now(plan))
      return make_lease(std::move(*ref), block, blocks);
    auto rp = make_response_promise<block_cache>();
    park(std::move(plan), [this, rp, block, blocks](caf::expected<byte_ref> x) mutable {
      if (!x) {
        rp.deliver(std::move(x.error()));
        return;
      }
      try {
        rp.deliver(make_lease(std::move(*x), block, blocks));
      } catch (const std::bad_alloc&) {
        rp.deliver(make_caf_error(errc::out_of_memory, "host memory exhausted carving a lease"));
      }
    });
    return rp;
  }

  /// Carves the backing region into the lease's blocks (ids reserved here).
  block_cache make_lease(byte_ref backing, std::size_t block, std::uint32_t blocks) {
    auto* entry = table_.find(backing.id());
    const auto first = next_id_;
    const auto backend_bytes = backing.region_record()->backend_bytes;
    // If this throws, the backing ref goes back to the allocator like any dropped region.
    auto* state = new detail::lease_state(std::move(backing), first, block, blocks);
    next_id_ += blocks;
    entry->lease_blocks = blocks;
    ++stats_.live_leases;
    stats_.leased_bytes += backend_bytes;
    return block_cache::adopt(state);
  }

  /// What the allocator knows of the advice on the region `id`: a table region, or a leased
  /// block (tracked only once advised). Null for an unknown id.
  advice_state* advice_of(std::uint64_t id) {
    if (auto* e = table_.find(id))
      return &e->advice;
    auto it = leased_advice_.find(id);
    return it == leased_advice_.end() ? nullptr : &it->second.state;
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
      const auto* r = refs[i].region_record()->home;  // a leased block lies in its lease
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
    const auto lane = worker_lanes::for_destinations(merged.locations);
    return offload<op_result>(
        lane,
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
        },
        {}, true);
  }

  caf::typed_response_promise<op_result> discard(const discard_request& r) {
    check_refs(r.refs, "discard");
    check_stream(r.stream, "discard");
    auto summary = summarize(ranges_of(r.refs), r.reply_when);
    auto merged = coalesced(r.refs, {});
    summary.backend_ranges = merged.ranges.size();
    return offload<op_result>(
        worker_lanes::general,
        [b = backend_, ranges = std::move(merged.ranges), stream = r.stream, keep = r.refs,
         summary] {
          b->discard(ranges, stream);
          return summary;
        },
        r.stream, r.reply_when,
        [this](op_result& res) {
          stats_.discards += res.ranges;
          stats_.discard_bytes += res.bytes;
        },
        {}, true);
  }

  /// Advice the allocator knows to change nothing is skipped (tracked per whole region).
  caf::result<op_result> advise(const advise_request& r) {
    check_refs(r.refs, "advise");
    validate_advice(*backend_, r.what, r.where);
    auto summary = summarize(ranges_of(r.refs), completion::enqueued);
    std::vector<byte_range> todo;
    std::vector<std::uint64_t> touched;
    for (const auto& ref : r.refs) {
      auto* rec = ref.region_record();
      if (rec->leased()) {
        // Tracked from its first advice on; its last drop then goes through the actor, which
        // resets the advice before the lease hands the block out again.
        leased_advice_.try_emplace(rec->id, leased_block{rec, {}});
        rec->needs_reset.store(true, std::memory_order_release);
      }
      auto& state = *advice_of(rec->id);
      const bool whole = ref.byte_offset() == 0 && ref.bytes() == rec->bytes;
      if (whole && state.unchanged_by(r.what, r.where)) {
        ++stats_.advice_elided;
        continue;
      }
      if (whole)
        state.apply(r.what, r.where);
      else
        state.known = false;  // part of the region: its state is no longer one value
      todo.push_back(ref.range());
      touched.push_back(ref.id());
    }
    summary.backend_ranges = todo.size();
    if (todo.empty()) {
      stats_.advises += summary.ranges;
      return summary;
    }
    return offload<op_result>(
        worker_lanes::general,
        [b = backend_, todo = std::move(todo), what = r.what, where = r.where, keep = r.refs,
         summary] {
          apply_advice_whole(*b, todo, what, where);
          return summary;
        },
        {}, completion::enqueued, [this](op_result& res) { stats_.advises += res.ranges; },
        [this, touched = std::move(touched)] {
          for (auto id : touched)  // the runtime refused: what is in force is not known
            if (auto* a = advice_of(id))
              a->known = false;
        });
  }

  bool can_access(const location& loc, const byte_ref& ref) {
    check_refs({&ref, 1}, "can_access");
    validate_location(*backend_, location_use::can_access, loc);
    if (!loc.is_device())
      return true;
    const auto& caps = backend_->capabilities(loc.id);
    const auto* entry = table_.find(ref.region_record()->home->id);
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

  using finish_fn = std::function<void(caf::message&, caf::error&)>;

  /// Runs `job` on `lane` and replies with its result from the actor thread, once the call
  /// returned (`enqueued`) or once `stream` reached it (`complete`). `on_success` runs on the
  /// actor thread before the reply (stats; may rewrite the reply).
  template <class T, class Job, class OnSuccess>
  caf::typed_response_promise<T> offload(std::size_t lane, Job job, stream_view stream,
                                         completion when, OnSuccess on_success,
                                         std::function<void()> on_failure = {},
                                         bool stream_ordered = false) {
    auto rp = make_response_promise<T>();
    post_job(
        lane, std::move(job), stream, when,
        [this, rp, on_success, on_failure](caf::message& payload, caf::error& err) mutable {
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
        },
        stream_ordered);
    return rp;
  }

  /// Runs `job` on `lane`; `finish` runs on the actor thread with its result. A stream-ordered
  /// job (prefetch, discard) goes to the lane of an unfinished job on the same stream, if any,
  /// so that a stream gets its operations in request order.
  template <class Job>
  void post_job(std::size_t lane, Job job, stream_view stream, completion when, finish_fn finish,
                bool stream_ordered = false) {
    const auto ticket = ++next_ticket_;
    if (stream_ordered) {
      lane = lanes_.begin_stream(lane, stream);
      finish = [this, stream, inner = std::move(finish)](caf::message& payload, caf::error& err) {
        lanes_.finish_stream(stream);
        inner(payload, err);
      };
    }
    pending_.emplace(ticket, std::move(finish));
    lanes_.post(lane, [job = std::move(job), hdl = caf::actor_cast<allocator_impl>(this), ticket,
                       lane, b = backend_, stream, when]() mutable {
      caf::message payload;
      caf::error err;
      bool fatal = false;
      try {
        payload = caf::make_message(job());
        if (when == completion::complete && lane != worker_lanes::general) {
          // A prefetch's own lane waits for the stream (its host call already blocked for most
          // of the transfer); a host callback costs a few percent of bandwidth (performance.md).
          b->wait_stream(stream);
        } else if (when == completion::complete) {
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
  }

  // -- releases and stop -------------------------------------------------------------------------

  void drain_releases() {
    for (const auto id : control_->take_releases()) {
      auto* entry = table_.find(id);
      if (entry == nullptr) {
        release_leased_block(id);
        continue;
      }
      auto* r = entry->region;
      if (r->refs.load(std::memory_order_acquire) != 0)
        continue;  // re-shared since
      ++stats_.releases;
      --stats_.live_regions;
      stats_.live_bytes -= r->backend_bytes;
      if (entry->lease_blocks != 0) {
        --stats_.live_leases;
        stats_.leased_bytes -= r->backend_bytes;
      }
      if (r->pooled()) {
        // The block's pages keep their advice: take it back before anyone else gets them (the
        // worker is FIFO, so the reset runs before any request of the block's next owner).
        if (!entry->advice.is_default())
          lanes_.post(
              worker_lanes::general,
              [b = backend_, range = byte_range{r->data, r->backend_bytes}, state = entry->advice,
               devices = backend_->device_count()] { reset_advice(*b, range, state, devices); });
        table_.erase(id);
        pool_->deallocate({r->slab, r->slab_offset, r->backend_bytes, r->data});
        detail::drop_table_ref(r);
        continue;
      }
      table_.erase(id);
      // cudaFree synchronizes the device: never on the actor's loop.
      lanes_.post(worker_lanes::general, [b = backend_, r] {
        b->free_managed(r->base, r->backend_bytes);
        detail::drop_table_ref(r);
      });
    }
  }

  /// An advised leased block came back: reset its advice on the worker (after every queued call
  /// on it), then return it to its lease.
  void release_leased_block(std::uint64_t id) {
    auto it = leased_advice_.find(id);
    if (it == leased_advice_.end())
      return;
    auto [block, state] = std::move(it->second);
    leased_advice_.erase(it);
    if (state.is_default()) {
      block->needs_reset.store(false, std::memory_order_relaxed);
      block->lease->give_back(block);
      return;
    }
    lanes_.post(worker_lanes::general,
                [b = backend_, block, state, devices = backend_->device_count()] {
                  reset_advice(*b, {block->data, block->backend_bytes}, state, devices);
                  block->needs_reset.store(false, std::memory_order_relaxed);
                  block->lease->give_back(block);
                });
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
    lanes_.drain_and_stop();  // queued prefetches, advice, frees and growth run out first
    // A slab that was being added when the incarnation stopped goes straight back.
    if (auto* base = growth_->base.exchange(nullptr)) {
      try {
        backend_->free_managed(base, growth_->bytes);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "uma: post_stop could not free a pool slab: %s\n", e.what());
      }
    }
    // Advised leased blocks whose release was queued but not handled: back to their leases
    // (their memory is freed with the lease's backing region below).
    try {
      for (const auto id : control_->take_releases())
        if (auto it = leased_advice_.find(id); it != leased_advice_.end())
          it->second.block->lease->give_back(it->second.block);
    } catch (...) {
      // out of host memory: those leases stay allocated on the host side (their GPU memory is
      // still freed below)
    }
    leased_advice_.clear();
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
    for (auto& item : std::exchange(parked_, {}))
      item.done(make_caf_error(errc::allocator_stopped,
                               "the allocator stopped before the pool could grow for the request"));
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
    s.pending_jobs = lanes_.pending();
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
  /// A leased block whose advice the allocator changed (reset when it comes back).
  struct leased_block {
    detail::region* block;
    advice_state state;
  };
  std::unordered_map<std::uint64_t, leased_block> leased_advice_;
  std::unique_ptr<block_pool> pool_;  // pool policy only
  /// Where the general lane leaves a slab it allocated for the pool (read back on the actor
  /// thread after the job_done, or by post_stop after the lanes drained).
  struct growth_slot {
    std::atomic<void*> base{nullptr};
    std::size_t bytes = 0;
  };
  std::shared_ptr<growth_slot> growth_ = std::make_shared<growth_slot>();
  std::deque<parked_alloc> parked_;
  bool growing_ = false;
  worker_lanes lanes_{[b = backend_] { b->prepare_thread(); }};  // last: joined first
};

}  // namespace

managed_allocator_actor spawn_allocator(caf::actor_system& sys, allocator_config config) {
  auto b = config.backend ? config.backend : make_backend(config.choice);
  if (config.detached)
    return sys.spawn<managed_allocator, caf::detached>(std::move(config), b);
  return sys.spawn<managed_allocator>(std::move(config), b);
}

}  // namespace uma
