#include <uma/actors/detail/allocation_core.hpp>

#include <algorithm>
#include <bit>
#include <cstdio>

#include <uma/actors/detail/request_checks.hpp>
#include <uma/memory/advice_ops.hpp>
#include <uma/memory/detail/round_up.hpp>
#include <uma/memory/location_rules.hpp>
#include <uma/messages/error_category.hpp>
#include <uma/sys/detail/format.hpp>
#include <uma/sys/log.hpp>

namespace uma::detail {

namespace {

/// The stats' count of tier memory held that `r` belongs to (null for managed memory). Kept at
/// adoption and at release, as live_leases is: the backend's free runs later on a lane.
std::uint64_t* tier_count(allocator_stats& s, const region* r) noexcept {
  switch (r->kind) {
    case memory_kind::pinned_host:
      return &s.host_tier_bytes;
    case memory_kind::cuda_device:
      return &s.device_tier_bytes;
    default:
      return nullptr;
  }
}

/// What the stack handed out for `r`, as allocate returned it.
allocation allocation_of(const region* r) noexcept {
  return {r->base, r->data, r->bytes, r->backend_bytes, r->kind, r->device};
}

/// What a snapshot says of a region's advice.
std::string describe(const advice_state& a) {
  if (!a.known)
    return "unknown";
  std::string out;
  const auto add = [&out](std::string_view part) {
    if (!out.empty())
      out.append(", ");
    out.append(part);
  };
  if (a.read_mostly)
    add("read_mostly");
  if (a.preferred)
    add(std::string("preferred ").append(to_string(*a.preferred)));
  for (const auto& loc : a.accessed_by)
    add(std::string("accessed_by ").append(to_string(loc)));
  return out.empty() ? "none" : out;
}

std::shared_ptr<event_history> history_for(const allocator_config& config) {
  return config.supervision.history
             ? config.supervision.history
             : std::make_shared<event_history>(config.supervision.event_history);
}

}  // namespace

allocation_core::allocation_core(const allocator_config& config, std::shared_ptr<backend> backend,
                                 std::shared_ptr<control_block> control, worker_lanes& lanes)
    : config_(config),
      backend_(std::move(backend)),
      control_(std::move(control)),
      lanes_(lanes),
      stack_(make_resource_stack(backend_, config.memory)),
      blocks_(std::make_shared<block_allocator>(
          resources(), control_,
          block_allocator_config{config.memory.max_pooled_block, config.memory.slab_bytes})),
      block_advice_(backend_, lanes) {
  stats_.backend = std::string(to_string(backend_->kind()));
  stats_.generation = config.supervision.generation;
  history_ = history_for(config);
  blocks_->record_labels_in(history_, config.supervision.generation);
  if (config.supervision.generation > 1)
    history_->record(event_kind::restart, config.supervision.generation, 0, 0, {},
                     std::string("generation ")
                         .append(std::to_string(config.supervision.generation))
                         .append(" started"));
}

std::shared_ptr<memory_resource> allocation_core::resources() const noexcept {
  return {stack_, &stack_->top()};
}

// -- allocation -----------------------------------------------------------------------------------

allocation_request allocation_core::checked_request(const allocate_request& r) const {
  if (r.count == 0 || r.element_size == 0)
    raise(errc::invalid_argument, "allocate: zero-size request (" + std::to_string(r.count) +
                                      " elements of " + std::to_string(r.element_size) +
                                      " bytes); uma hands out no empty regions");
  if (r.count > SIZE_MAX / r.element_size)
    raise(errc::overflow, "allocate: " + std::to_string(r.count) + " elements of " +
                              std::to_string(r.element_size) + " bytes overflow size_t");
  if (r.stream.handle != nullptr && backend_->is_capturing(r.stream))
    raise(errc::capture_in_progress, "allocate: stream " + detail::hex(r.stream.handle) +
                                         " is capturing a graph; managed memory cannot be "
                                         "allocated inside a capture");
  const std::size_t alignment =
      r.alignment == 0 ? stack_->top().properties().alignment : r.alignment;
  return {r.count * r.element_size, alignment, r.attach, r.label, r.kind, r.device};
}

bool allocation_core::as_block(const allocation_request& r) const noexcept {
  // What a block guarantees: page alignment, global attachment (an alignment that is no power
  // of two goes to the stack, which refuses it).
  return config_.memory.policy == allocation_policy::pool && blocks_->serves(r.bytes) &&
         std::has_single_bit(r.alignment) && r.alignment <= stack_->top().properties().page &&
         r.attach == attach_flag::global && r.kind == memory_kind::cuda_managed;
}

byte_ref allocation_core::take_block(block_allocator& blocks, const allocation_request& r,
                                     stream_view stream) {
  return r.label.empty() ? blocks.allocate(r.bytes, 0, stream)
                         : blocks.allocate_labelled<std::byte>(r.bytes, r.label, 0, stream);
}

byte_ref allocation_core::allocate_now(const allocation_request& r, stream_view stream) {
  if (as_block(r))  // a miss carves a slab here: one backend call, as a direct region's
    return take_block(*blocks_, r, stream);
  return adopt(stack_->top().allocate(r), r.attach);
}

byte_ref allocation_core::adopt(const allocation& a, attach_flag attach) {
  region* reg = nullptr;
  try {
    reg = new region(control_, control_->reserve_ids(1), a.base, a.data, a.bytes, a.charged,
                     nullptr, nullptr, a.kind, a.device);
    table_.insert(reg, attach);
  } catch (...) {
    delete reg;
    stack_->top().deallocate(a);
    throw;
  }
  if (history_->enabled())
    history_->record(event_kind::allocate, config_.supervision.generation, reg->id, a.bytes,
                     stack_->tracking().label_of(a.data));
  if (auto* held = tier_count(stats_, reg))
    *held += reg->backend_bytes;
  adopt_first_ref(reg);  // the reply's count; the table keeps the initial one
  return detail::adopt_ref<std::byte>(reg, 0, a.bytes);
}

// -- requests on refs -----------------------------------------------------------------------------

std::span<const byte_ref> allocation_core::check_refs(std::span<const byte_ref> refs,
                                                      const char* op) {
  detail::check_refs(refs, op, *control_, stats_.inert_refusals);
  return refs;
}

allocation_core::prefetch_work allocation_core::prefetch_work_for(const prefetch_request& r,
                                                                  bool discard_first) {
  const char* op = discard_first ? "discard_prefetch" : "prefetch";
  check_refs(r.refs, op);
  check_targets(*backend_, r, op);
  check_stream(*backend_, r.stream, op);
  note(event_kind::prefetch, r.refs, r.locations, discard_first ? "after discard to" : "to");
  prefetch_work work{summarize(ranges_of(r.refs), r.reply_when), coalesced(r.refs, r.locations)};
  work.summary.backend_ranges = work.merged.ranges.size();
  return work;
}

coalesced_ranges allocation_core::coalesced(std::span<const byte_ref> refs,
                                            std::span<const location> locations) {
  std::vector<keyed_range> keyed;
  keyed.reserve(refs.size());
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const auto* home = detail::record_of(refs[i])->home;  // a block lies in its slab
    keyed.push_back(
        {home->id, refs[i].range(),
         locations.empty() ? location::host() : locations[locations.size() == 1 ? 0 : i]});
  }
  auto out = coalesce(std::move(keyed));
  stats_.ranges_coalesced += refs.size() - out.ranges.size();
  return out;
}

advice_state& allocation_core::track_advice(const byte_ref& ref) {
  auto* rec = detail::record_of(ref);
  return rec->is_block() ? block_advice_.track(rec) : *advice_of(rec->id);
}

advice_state* allocation_core::advice_of(std::uint64_t id) {
  if (auto* e = table_.find(id))
    return &e->advice;
  return block_advice_.find(id);
}

allocation_core::advice_work allocation_core::advice_work_for(const advise_request& r) {
  advice_work work{summarize(ranges_of(r.refs), completion::enqueued), {}, {}};
  for (const auto& ref : r.refs) {
    auto& state = track_advice(ref);
    const bool whole = ref.byte_offset() == 0 && ref.bytes() == record_of(ref)->bytes;
    if (whole && state.unchanged_by(r.what, r.where)) {
      count_advice(0, 1);
      continue;
    }
    if (whole)
      state.apply(r.what, r.where);
    else
      state.known = false;  // part of the region: its state is no longer one value
    work.todo.push_back(ref.range());
    work.touched.push_back(ref.id());
  }
  work.summary.backend_ranges = work.todo.size();
  return work;
}

void allocation_core::check_advice(const advise_request& r) {
  check_refs(r.refs, "advise");
  validate_advice(*backend_, r.what, r.where);
}

bool allocation_core::changes_nothing(const advise_request& r) {
  return std::all_of(r.refs.begin(), r.refs.end(), [&](const byte_ref& ref) {
    const auto* rec = record_of(ref);
    const auto* state = advice_of(rec->id);  // a block's only once advised (not created here)
    const bool whole = ref.byte_offset() == 0 && ref.bytes() == rec->bytes;
    return state != nullptr && whole && state->unchanged_by(r.what, r.where);
  });
}

allocation_core::advice_work allocation_core::checked_advice(const advise_request& r) {
  check_advice(r);
  note(event_kind::advise, r.refs, {&r.where, 1}, to_string(r.what));
  return advice_work_for(r);
}

void allocation_core::forget_advice(std::span<const std::uint64_t> ids) noexcept {
  for (auto id : ids)
    if (auto* a = advice_of(id))
      a->known = false;
}

const region_table::entry* allocation_core::entry_of(const byte_ref& ref) {
  return table_.find(detail::record_of(ref)->home->id);
}

bool allocation_core::can_access(const location& loc, const byte_ref& ref) {
  (void)check_refs({&ref, 1}, "can_access");
  validate_location(*backend_, location_use::can_access, loc);
  if (!loc.is_device())
    return true;
  const auto& caps = backend_->capabilities(loc.id);
  const auto* entry = entry_of(ref);
  const bool attached_global = entry && entry->attach == attach_flag::global;
  return caps.managed_memory && (attached_global || caps.concurrent_managed_access);
}

// -- releases, quota, stats -----------------------------------------------------------------------

void allocation_core::adopt_slabs(const std::vector<slab_adoption>& slabs) {
  for (const auto& s : slabs) {
    table_.insert(s.home, attach_flag::global);
    table_.find(s.home->id)->slab_blocks = s.blocks;
    ++stats_.live_leases;
    stats_.leased_bytes += s.home->backend_bytes;
    if (history_->enabled())
      history_->record(event_kind::allocate, config_.supervision.generation, s.home->id,
                       s.home->bytes, stack_->tracking().label_of(s.home->data));
  }
}

void allocation_core::drain_releases() {
  // One snapshot of the queue, slabs first: a slab is queued when it is carved, before any
  // release of it (its trim) can be, so every id below that names a slab finds it in the table.
  const auto batch = control_->take_releases();
  adopt_slabs(batch.slabs);
  for (const auto id : batch.ids) {
    auto* entry = table_.find(id);
    if (entry == nullptr) {
      (void)block_advice_.release(id);  // an advised block's last drop
      continue;
    }
    auto* r = entry->region;
    if (r->refs.load(std::memory_order_acquire) != 0)
      continue;  // re-shared since
    if (entry->slab_blocks != 0) {
      --stats_.live_leases;
      stats_.leased_bytes -= r->backend_bytes;
    }
    if (history_->enabled())
      history_->record(event_kind::release, config_.supervision.generation, id, r->bytes,
                       stack_->tracking().label_of(r->data));
    table_.erase(id);
    if (auto* held = tier_count(stats_, r))
      *held -= r->backend_bytes;
    if (on_free_)
      on_free_(id);
    // cudaFree synchronizes the device: never on the actor's loop.
    lanes_.post(worker_lanes::general, [stack = resources(), r, memory = allocation_of(r)] {
      stack->deallocate(memory);
      drop_table_ref(r);
    });
  }
}

std::uint64_t allocation_core::set_quota(std::uint64_t bytes) {
  if (bytes != 0)
    stack_->limit().set_limit(bytes);
  return stack_->limit().limit();
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
  const auto counted = stack_->statistics().statistics();
  s.quota_bytes = stack_->limit().limit();
  s.allocations = counted.allocations;
  s.releases = counted.deallocations;
  s.live_regions = counted.current_count;
  s.live_bytes = counted.current_bytes;
  s.peak_bytes = counted.peak_bytes;
  s.total_bytes_allocated = counted.total_bytes;
  s.reserved_bytes = stack_->limit().held();  // slabs + direct regions
  s.pending_jobs = lanes_.pending();
  const auto copied = copies();
  s.copy_to_device_bytes = copied.to_device_bytes;
  s.copy_to_host_bytes = copied.to_host_bytes;
  s.copy_other_bytes = copied.other_bytes;
  s.copies = copied.copies;
  return s;
}

std::vector<region_info> allocation_core::report() const {
  auto out = table_.report(config_.supervision.generation, stack_->tracking());
  // Labelled blocks are rows of their own (a label is for the report), not regions: their
  // bytes lie in a slab's row, and their pins count there.
  const auto now = std::chrono::steady_clock::now();
  for (auto& b : blocks_->labelled_blocks())
    if (b.refs > 0)  // else its last drop is on its way back (an advice reset, say)
      out.push_back(region_info{
          b.id, config_.supervision.generation, b.bytes, std::move(b.label), attach_flag::global,
          b.refs, 0,
          std::chrono::duration_cast<std::chrono::milliseconds>(now - b.created).count()});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

// -- history and snapshots -----------------------------------------------------------------------

void allocation_core::note(event_kind kind, std::span<const byte_ref> refs,
                           std::span<const location> locations, std::string_view detail) {
  for (std::size_t i = 0; i < refs.size(); ++i) {
    const auto* home = detail::record_of(refs[i])->home;
    const location* loc = locations.empty() ? nullptr : &locations[locations.size() == 1 ? 0 : i];
    if (loc != nullptr && kind == event_kind::prefetch)
      if (auto* e = table_.find(home->id))
        e->last_prefetch = *loc;
    if (!history_->enabled())
      continue;
    std::string text(detail);
    if (loc != nullptr)
      text.append(text.empty() ? "" : " ").append(to_string(*loc));
    history_->record(kind, config_.supervision.generation, home->id, refs[i].bytes(),
                     stack_->tracking().label_of(home->data), text);
  }
}

allocator_snapshot allocation_core::snapshot() const {
  allocator_snapshot out;
  out.taken_at_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  out.generation = config_.supervision.generation;
  out.stats = stats();
  out.backend = out.stats.backend;
  for (auto& info : report()) {
    region_snapshot row{std::move(info)};
    if (const auto* e = table_.find(row.info.id)) {
      row.policy = e->slab_blocks != 0 ? region_policy::slab : region_policy::direct;
      row.advice = describe(e->advice);
      row.last_prefetch = e->last_prefetch;
    } else {  // a labelled block
      row.policy = region_policy::block;
      if (const auto* a = block_advice_.find(row.info.id))
        row.advice = describe(*a);
    }
    out.regions.push_back(std::move(row));
  }
  out.events = history_->events();
  out.events_dropped = history_->dropped();
  out.event_capacity = history_->capacity();
  return out;
}

// -- stop -----------------------------------------------------------------------------------------

void allocation_core::leak(std::uint64_t id, const region_table::entry& e, stop_report& report) {
  const auto* r = e.region;
  ++report.regions_leaked;
  report.bytes_leaked += r->bytes;
  if (e.slab_blocks != 0) {  // a leaked slab stays counted
    ++stats_.live_leases;
    stats_.leased_bytes += r->backend_bytes;
  }
  report.leaked_ids.push_back(id);
  log(log_level::warning,
      "region " + std::to_string(id) + " ('" + stack_->tracking().label_of(r->data) + "', " +
          std::to_string(r->bytes) + " bytes, generation " +
          std::to_string(config_.supervision.generation) + ") is still pinned after the " +
          std::to_string(config_.supervision.drain_timeout.count()) +
          " ms drain timeout: leaked on purpose, never freed under a reader");
}

std::uint64_t allocation_core::stop(stop_report& report) noexcept {
  // No slab is carved from now on; those queued join the table (freed or leaked below). Advised
  // blocks whose release was queued: back to the block allocator (freed with their slab below).
  blocks_->seal();
  try {
    const auto batch = control_->take_releases();
    adopt_slabs(batch.slabs);
    block_advice_.give_back(batch.ids);
  } catch (...) {
    // out of host memory: those blocks' host state stays (their memory is still freed below)
  }
  std::uint64_t leaked_backend_bytes = 0;
  std::vector<const void*> leaked_data;
  stats_.live_leases = stats_.leased_bytes = 0;
  for (auto& [id, e] : table_.take_all()) {
    auto* r = e.region;
    // After a successful drain no pin can be held: a non-zero region count is a pin attempt
    // that is backing off (try_pin raises it before it learns of the stop). Only a drain that
    // timed out leaves real readers behind.
    const bool pinned = !report.pins_drained && r->pins.load(std::memory_order_seq_cst) > 0;
    if (pinned) {
      try {
        leak(id, e, report);
        leaked_data.push_back(r->data);
      } catch (...) {
        // out of host memory: the region is still leaked, only its report is short
      }
      leaked_backend_bytes += r->backend_bytes;
    } else {
      stack_->top().deallocate(allocation_of(r));  // the lanes have stopped: frees run here
      if (auto* held = tier_count(stats_, r))
        *held -= r->backend_bytes;
    }
    if (!pinned) {
      ++report.regions_freed;
      report.bytes_freed += r->bytes;
    }
    drop_table_ref(r);
  }
  stack_->tracking().keep_only(leaked_data);
  blocks_->close();  // after the leak decisions: its raw pins kept pinned slabs from being freed
  try {
    history_->record(event_kind::stop, config_.supervision.generation, 0, report.bytes_freed, {},
                     std::to_string(report.regions_freed) + " regions freed, " +
                         std::to_string(report.regions_leaked) + " leaked");
  } catch (...) {
    // out of host memory: the stop goes unrecorded
  }
  return leaked_backend_bytes;
}

}  // namespace uma::detail
