#include <uma/actors/detail/allocation_core.hpp>

#include <algorithm>
#include <bit>
#include <cstdio>

#include <uma/memory/advice_ops.hpp>
#include <uma/messages/error_category.hpp>
#include <uma/sys/detail/format.hpp>
#include <uma/sys/log.hpp>

namespace uma::detail {

allocation_core::allocation_core(const allocator_config& config, std::shared_ptr<backend> backend,
                                 std::shared_ptr<control_block> control, worker_lanes& lanes,
                                 grow_fn grow)
    : config_(config),
      backend_(std::move(backend)),
      control_(std::move(control)),
      lanes_(lanes),
      grow_(std::move(grow)),
      quota_(config.quota_bytes != 0 ? config.quota_bytes : backend_->default_quota()) {
  stats_.backend = std::string(to_string(backend_->kind()));
  stats_.generation = config.generation;
  stats_.quota_bytes = quota_;
  if (config.policy == allocation_policy::pool)
    pool_ = std::make_unique<block_pool>(
        *backend_, config.slab_bytes, config.max_pooled_block, attach_flag::global, quota_,
        [this](void* base, std::size_t bytes) {
          lanes_.post(worker_lanes::general,
                      [b = backend_, base, bytes] { b->free_managed(base, bytes); });
        });
}

// -- allocation -----------------------------------------------------------------------------------

allocation_core::plan allocation_core::plan_allocation(const allocate_request& r) const {
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
    raise(errc::overflow, "allocate: " + detail::bytes(bytes) + " plus " + detail::bytes(padding) +
                              " of alignment padding overflow size_t");
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

void allocation_core::check_quota(std::size_t backend_bytes) const {
  if (backend_bytes > quota_ || stats_.live_bytes > quota_ - backend_bytes)
    raise(errc::quota_exceeded, "allocate: " + detail::bytes(backend_bytes) +
                                    " would bring live bytes to " +
                                    std::to_string(stats_.live_bytes + backend_bytes) +
                                    ", over the quota of " + detail::bytes(quota_));
}

std::optional<byte_ref> allocation_core::try_allocate_now(const plan& p) {
  region* reg = nullptr;
  if (p.pooled) {
    const auto blk = pool_->try_allocate(p.bytes);
    if (!blk)
      return std::nullopt;
    try {
      reg = new region(control_, next_id_, blk->data, blk->data, p.bytes, blk->bytes, blk->slab,
                       blk->offset);
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
      reg = new region(control_, next_id_, base, data, p.bytes, p.backend_bytes);
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
  adopt_first_ref(reg);  // the reply's count; the table keeps the initial one
  return byte_ref::adopt(reg, 0, p.bytes);
}

// -- pool growth off the actor's loop
// --------------------------------------------------------------

void allocation_core::park(plan p, done_fn done) {
  parked_.push_back({std::move(p), std::move(done), false});
  grow_pool();
}

void allocation_core::fail_parked_head(caf::error err) {
  count_failure(err);
  auto item = std::move(parked_.front());
  parked_.pop_front();
  item.done(std::move(err));
}

void allocation_core::grow_pool() {
  while (!growing_ && !parked_.empty()) {
    std::size_t slab = 0;
    try {
      slab = pool_->growth_for(parked_.front().p.bytes);
    } catch (const error& e) {
      if (e.code() == errc::quota_exceeded && pool_->trim() > 0)
        continue;  // cached empty slabs went back: there may be room now
      fail_parked_head(make_caf_error(e));
      continue;
    }
    try {
      grow_(slab);
    } catch (const std::exception& e) {
      fail_parked_head(make_caf_error(errc::out_of_memory,
                                      std::string("could not start a pool growth: ") + e.what()));
      continue;
    }
    growing_ = true;  // one growth at a time; on_slab clears it
    return;
  }
}

void allocation_core::on_slab(caf::error err) {
  growing_ = false;
  if (parked_.empty())
    return;  // stop(): it answered the parked requests and frees a late slab itself
  if (err) {
    // A fatal error ends the incarnation right after this; stop() fails the rest (and frees a
    // slab that a growth started here may still add).
    if (err.category() == error_category &&
        err.code() == static_cast<std::uint8_t>(errc::out_of_memory) && !parked_.front().retried &&
        pool_->trim() > 0) {
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
    fail_parked_head(make_caf_error(errc::out_of_memory, "host memory exhausted growing the pool"));
  }
  serve_parked();
}

void allocation_core::serve_parked() {
  while (!parked_.empty() && !growing_) {
    std::optional<byte_ref> ref;
    try {
      check_quota(parked_.front().p.backend_bytes);  // live bytes moved meanwhile
      ref = try_allocate_now(parked_.front().p);
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

// -- leases ---------------------------------------------------------------------------------------

std::size_t allocation_core::page_bytes() const noexcept {
  return pool_ ? pool_->page()
               : std::max<std::size_t>(backend_->guaranteed_alignment(), std::size_t{4096});
}

allocation_core::lease_plan allocation_core::plan_lease(const lease_request& r) const {
  if (r.block_bytes == 0 || r.blocks == 0)
    raise(errc::invalid_argument, "lease: zero-size request (" + std::to_string(r.blocks) +
                                      " blocks of " + std::to_string(r.block_bytes) +
                                      " bytes); a lease needs at least one non-empty block");
  if (r.blocks >= lease_state::none)
    raise(errc::invalid_argument, "lease: " + std::to_string(r.blocks) +
                                      " blocks; a lease holds at most " +
                                      std::to_string(lease_state::none - 1));
  const std::size_t page = page_bytes();
  const std::size_t block =
      r.block_bytes > SIZE_MAX - (page - 1) ? 0 : (r.block_bytes + page - 1) / page * page;
  if (block == 0 || r.blocks > SIZE_MAX / block)
    raise(errc::overflow, "lease: " + std::to_string(r.blocks) + " blocks of " +
                              std::to_string(r.block_bytes) +
                              " bytes (page-rounded) overflow size_t");
  allocate_request backing{block * r.blocks, 1, page, attach_flag::global, {}, {}};
  backing.label = "lease: " + std::to_string(r.blocks) + " x " + detail::bytes(block) +
                  (r.label.empty() ? "" : " " + r.label);
  return {plan_allocation(backing), block, static_cast<std::uint32_t>(r.blocks)};
}

block_cache allocation_core::make_lease(byte_ref backing, std::size_t block_bytes,
                                        std::uint32_t blocks) {
  auto* entry = table_.find(backing.id());
  const auto first = next_id_;
  const auto backend_bytes = detail::record_of(backing)->backend_bytes;
  // If this throws, the backing ref goes back to the allocator like any dropped region.
  auto* state = new lease_state(std::move(backing), first, block_bytes, blocks);
  next_id_ += blocks;
  entry->lease_blocks = blocks;
  ++stats_.live_leases;
  stats_.leased_bytes += backend_bytes;
  return block_cache::adopt(state);
}

// -- requests on refs -----------------------------------------------------------------------------

coalesced_ranges allocation_core::coalesced(std::span<const byte_ref> refs,
                                            std::span<const location> locations) {
  std::vector<keyed_range> keyed;
  keyed.reserve(refs.size());
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const auto* r = detail::record_of(refs[i])->home;  // a leased block lies in its lease
    const std::uint64_t allocation = r->pooled() ? r->slab : (std::uint64_t{1} << 32) + r->id;
    keyed.push_back(
        {allocation, refs[i].range(),
         locations.empty() ? location::host() : locations[locations.size() == 1 ? 0 : i]});
  }
  auto out = coalesce(std::move(keyed));
  stats_.ranges_coalesced += refs.size() - out.ranges.size();
  return out;
}

advice_state& allocation_core::track_advice(const byte_ref& ref) {
  auto* rec = detail::record_of(ref);
  if (rec->leased()) {
    leased_advice_.try_emplace(rec->id, leased_block{rec, {}});
    rec->needs_reset.store(true, std::memory_order_release);
  }
  return *advice_of(rec->id);
}

advice_state* allocation_core::advice_of(std::uint64_t id) {
  if (auto* e = table_.find(id))
    return &e->advice;
  auto it = leased_advice_.find(id);
  return it == leased_advice_.end() ? nullptr : &it->second.state;
}

const region_table::entry* allocation_core::entry_of(const byte_ref& ref) {
  return table_.find(detail::record_of(ref)->home->id);
}

// -- releases, quota, stats -----------------------------------------------------------------------

void allocation_core::drain_releases() {
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
      // The block's pages keep their advice: take it back before anyone else gets them (on the
      // general lane, where the next owner's advice runs too).
      if (!entry->advice.is_default())
        lanes_.post(
            worker_lanes::general,
            [b = backend_, range = byte_range{r->data, r->backend_bytes}, state = entry->advice,
             devices = backend_->device_count()] { reset_advice(*b, range, state, devices); });
      table_.erase(id);
      pool_->deallocate({r->slab, r->slab_offset, r->backend_bytes, r->data});
      drop_table_ref(r);
      continue;
    }
    table_.erase(id);
    // cudaFree synchronizes the device: never on the actor's loop.
    lanes_.post(worker_lanes::general, [b = backend_, r] {
      b->free_managed(r->base, r->backend_bytes);
      drop_table_ref(r);
    });
  }
}

void allocation_core::release_leased_block(std::uint64_t id) {
  auto it = leased_advice_.find(id);
  if (it == leased_advice_.end())
    return;
  // Not a structured binding: clang 14 (the fuzz build) cannot capture one.
  region* block = it->second.block;
  advice_state state = std::move(it->second.state);
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

std::uint64_t allocation_core::set_quota(std::uint64_t bytes) {
  if (bytes != 0 && bytes < stats_.live_bytes)
    raise(errc::invalid_argument, "quota: " + detail::bytes(bytes) + " is below the live bytes (" +
                                      detail::bytes(stats_.live_bytes) + ")");
  if (bytes != 0)
    quota_ = stats_.quota_bytes = bytes;  // a pool keeps its slab limit from the start
  return quota_;
}

void allocation_core::count_failure(const caf::error& err) {
  const auto code = err.category() == error_category && err.code() < errc_slots
                        ? err.code()
                        : static_cast<std::uint8_t>(errc::backend_error);
  ++stats_.failures[code];
}

void allocation_core::count_prefetch(const op_result& r, bool discard_first) {
  stats_.prefetches += r.ranges;
  stats_.prefetch_bytes += r.bytes;
  if (discard_first)
    count_discard(r);
}

void allocation_core::count_discard(const op_result& r) {
  stats_.discards += r.ranges;
  stats_.discard_bytes += r.bytes;
}

void allocation_core::count_advice(std::uint64_t ranges, std::uint64_t elided) {
  stats_.advises += ranges;
  stats_.advice_elided += elided;
}

allocator_stats allocation_core::stats() const {
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

// -- stop -----------------------------------------------------------------------------------------

std::uint64_t allocation_core::stop(stop_report& report) noexcept {
  // A slab that was being added when the incarnation stopped goes straight back.
  if (auto* base = growth_->base.exchange(nullptr)) {
    try {
      backend_->free_managed(base, growth_->bytes);
    } catch (const std::exception& e) {
      log(log_level::error, std::string("post_stop could not free a pool slab: ") + e.what());
    }
  }
  // Advised leased blocks whose release was queued but not handled: back to their leases (their
  // memory is freed with the lease's backing region below).
  try {
    for (const auto id : control_->take_releases())
      if (auto it = leased_advice_.find(id); it != leased_advice_.end())
        it->second.block->lease->give_back(it->second.block);
  } catch (...) {
    // out of host memory: those leases' host state stays (their memory is still freed below)
  }
  leased_advice_.clear();
  std::uint64_t leaked_backend_bytes = 0, leaked_leases = 0, leaked_lease_bytes = 0;
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
      if (e.lease_blocks != 0) {
        ++leaked_leases;
        leaked_lease_bytes += r->backend_bytes;
      }
      report.leaked_ids.push_back(id);
      log(log_level::warning,
          "region " + std::to_string(id) + " ('" + e.label + "', " + std::to_string(r->bytes) +
              " bytes, generation " + std::to_string(config_.generation) +
              ") is still pinned after the " + std::to_string(config_.drain_timeout.count()) +
              " ms drain timeout: leaked on purpose, never freed under a reader");
    } else {
      if (!r->pooled())
        backend_->free_managed(r->base, r->backend_bytes);
      ++report.regions_freed;
      report.bytes_freed += r->bytes;
    }
    drop_table_ref(r);
  }
  if (pool_)
    pool_->release_all(pinned_slabs);  // the lanes have stopped: frees run here, in order
  for (auto& item : std::exchange(parked_, {}))
    item.done(make_caf_error(errc::allocator_stopped,
                             "the allocator stopped before the pool could grow for the request"));
  // What the incarnation holds after post_stop: only what it had to leak.
  stats_.releases += report.regions_freed;
  stats_.live_regions = report.regions_leaked;
  stats_.live_bytes = leaked_backend_bytes;
  stats_.live_leases = leaked_leases;
  stats_.leased_bytes = leaked_lease_bytes;
  return leaked_backend_bytes;
}

}  // namespace uma::detail
