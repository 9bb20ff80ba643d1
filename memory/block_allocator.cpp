#include <uma/memory/block_allocator.hpp>

#include <algorithm>
#include <string>

#include <uma/memory/detail/block_labels.hpp>
#include <uma/memory/detail/block_shard.hpp>
#include <uma/memory/detail/give_back.hpp>
#include <uma/memory/detail/size_classes.hpp>
#include <uma/memory/detail/slab.hpp>
#include <uma/memory/detail/slab_registry.hpp>
#include <uma/sys/log.hpp>

namespace uma {

using detail::block;
using detail::region;
using detail::slab;

namespace {

block_allocator_config checked(block_allocator_config c) {
  if (c.max_bytes == 0 || c.max_bytes > (std::size_t{1} << 40))
    raise(errc::invalid_argument,
          "block_allocator: max_bytes " + std::to_string(c.max_bytes) + " must be 1 byte to 1 TiB");
  if (c.slab_bytes == 0)
    raise(errc::invalid_argument, "block_allocator: slab_bytes must not be 0");
  return c;
}

[[noreturn]] void refuse(const char* what, std::size_t bytes, std::size_t max) {
  raise(errc::invalid_argument, std::string(what) + ": " + std::to_string(bytes) +
                                    " bytes; the block allocator serves 1 to " +
                                    std::to_string(max) + " bytes");
}

[[noreturn]] void stopped(std::uint64_t generation) {
  raise(errc::allocator_stopped, "block_allocator: generation " + std::to_string(generation) +
                                     " has stopped; its blocks are inert");
}

/// Streams that never go away (the legacy default stream, cudaStreamLegacy,
/// cudaStreamPerThread): an event may be recorded on them long after the free. On any other
/// stream the event is recorded at the free, since the stream may be destroyed after it.
bool lasting(void* stream) noexcept {
  return reinterpret_cast<std::uintptr_t>(stream) <= 2;
}

/// After block `b`'s free: records the event that orders its reuse on another stream (on a
/// user stream now; on a lasting one when another stream first looks at it). In this file, so
/// that a return on a lasting stream (the facade's) costs no call.
void record_free(block& b) noexcept {
  b.event_recorded = false;
  if (lasting(b.stream) || b.stream_bound)
    return;
  auto& events = b.rec.parent->events();
  try {
    if (b.event == nullptr)
      b.event = events.create_event();
    events.record_event(b.event, stream_view{b.stream});
    b.event_recorded = true;
  } catch (const std::exception& e) {
    log(log_level::warning,
        std::string("block_allocator: a block stays on its stream: ") + e.what());
    b.stream_bound = true;
  }
}

}  // namespace

block_allocator::block_allocator(std::shared_ptr<memory_resource> stack,
                                 std::shared_ptr<detail::control_block> control,
                                 block_allocator_config config)
    : stack_(std::move(stack)),
      control_(std::move(control)),
      config_(checked(config)),
      page_(stack_->properties().page),
      classes_(class_of(config_.max_bytes) + 1),
      registry_(std::make_unique<detail::slab_registry>()),
      shards_(std::make_unique<detail::block_shard[]>(detail::block_shards)),
      labels_(std::make_unique<detail::block_labels>()) {}

block_allocator::~block_allocator() = default;

std::uint32_t block_allocator::class_of(std::size_t bytes) const noexcept {
  return detail::size_classes::index_of((bytes + page_ - 1) / page_);
}

// -- handing out ----------------------------------------------------------------------------------

region* block_allocator::take_ref(std::size_t bytes, int device, stream_view stream) {
  if (!serves(bytes))
    refuse("block_allocator::allocate", bytes, config_.max_bytes);
  return &take(bytes, device, stream.handle, false)->rec;  // its count taken for the caller
}

void* block_allocator::allocate_raw(std::size_t bytes, int device, stream_view stream) {
  if (!serves(bytes))
    refuse("block_allocator::allocate_raw", bytes, config_.max_bytes);
  return take(bytes, device, stream.handle, true)->rec.data;
}

detail::block_shard& block_allocator::own_shard() noexcept {
  static std::atomic<std::size_t> next{0};
  thread_local const std::size_t index = next.fetch_add(1, std::memory_order_relaxed);
  return shards_[index % detail::block_shards];
}

std::uint32_t block_allocator::index_of(const detail::block_shard& sh) const noexcept {
  return static_cast<std::uint32_t>(&sh - shards_.get());
}

block* block_allocator::take(std::size_t bytes, int device, void* stream, bool raw) {
  const auto cls = class_of(bytes);
  auto& own = own_shard();
  {
    std::lock_guard lock(own.mutex);
    if (closed_.load(std::memory_order_relaxed) || !control_->alive())
      stopped(control_->generation());
    if (auto* b = own.pop(cls, device, stream, classes_)) {
      hand_out(own, *b, bytes, device, stream, raw, index_of(own));
      ++own.hits;
      return b;
    }
  }
  if (auto* b = steal(own, cls, bytes, device, stream, raw))
    return b;
  return grow(own, cls, bytes, device, stream, raw);
}

block* block_allocator::steal(const detail::block_shard& own, std::uint32_t cls, std::size_t bytes,
                              int device, void* stream, bool raw) {
  for (std::size_t i = 0; i < detail::block_shards; ++i) {
    auto& sh = shards_[i];
    if (&sh == &own)
      continue;
    std::lock_guard lock(sh.mutex);
    if (closed_.load(std::memory_order_relaxed))
      stopped(control_->generation());
    if (auto* b = sh.pop(cls, device, stream, classes_)) {
      // It moves to the taker's shard: else a thread whose shard is empty would take (and give
      // back) every block through another's lock, after looking into all of them.
      hand_out(sh, *b, bytes, device, stream, raw, index_of(own));
      ++sh.hits;
      return b;
    }
  }
  return nullptr;
}

void block_allocator::hand_out(detail::block_shard& sh, block& b, std::size_t bytes, int device,
                               void* stream, bool raw, std::uint32_t home) {
  auto* s = b.rec.parent;
  if (raw) {
    try {
      s->pin_for_raw();
    } catch (...) {  // stopped meanwhile: the block stays free
      sh.list(b, s->size_class(), classes_);
      throw;
    }
  }
  sh.free -= static_cast<std::int64_t>(s->block_bytes());
  sh.in_use += static_cast<std::int64_t>(s->block_bytes());
  sh.requested += static_cast<std::int64_t>(bytes);
  ++sh.blocks;
  b.shard = home;
  s->count_out(home, 1);
  b.clean = b.event_recorded = false;
  b.raw.store(raw, std::memory_order_relaxed);
  b.device = device;
  b.stream = stream;
  b.requested = bytes;
  b.rec.refs.store(1, std::memory_order_relaxed);  // the caller's ref (raw: held for the caller)
  b.out.store(true, std::memory_order_release);
}

// -- growth: a slab from the stack, on the caller's thread ----------------------------------------

block* block_allocator::grow(detail::block_shard& own, std::uint32_t cls, std::size_t bytes,
                             int device, void* stream, bool raw) {
  std::lock_guard grow_lock(grow_mutex_);
  {
    std::lock_guard lock(own.mutex);  // another thread may have carved this class meanwhile
    if (auto* b = own.pop(cls, device, stream, classes_)) {
      hand_out(own, *b, bytes, device, stream, raw, index_of(own));
      ++own.hits;
      return b;
    }
  }
  const std::size_t block_bytes = detail::size_classes::pages_of(cls) * page_;
  auto* s = control_->watched([&] {  // a fatal error ends the incarnation, on any thread
    return slab::carve(shared_from_this(), *stack_, control_, block_bytes,
                       std::max<std::size_t>(1, config_.slab_bytes / block_bytes), cls);
  });
  block* first = nullptr;
  {
    auto lock = registry_->lock();
    try {
      if (closed_.load(std::memory_order_relaxed))  // the incarnation ended meanwhile: nothing
        stopped(control_->generation());            // may join it now
      registry_->add(s, *control_);  // queued for the actor under the lock the seal takes
    } catch (...) {
      lock.unlock();
      slab::abandon(s, *stack_);
      throw;
    }
    std::lock_guard shard_lock(own.mutex);
    for (std::uint32_t i = s->count(); i-- > 0;) {
      auto& b = s->at(i);
      b.device = device;
      b.stream = stream;
      if (i > 0)
        own.list(b, cls, classes_);
    }
    own.free += static_cast<std::int64_t>(s->bytes());
    first = &s->at(0);
    hand_out(own, *first, bytes, device, stream, raw, index_of(own));
    ++own.misses;
  }
  control_->wake();  // outside the locks: a message to the actor
  return first;
}

// -- coming back ----------------------------------------------------------------------------------

region* block_allocator::take_labelled(std::size_t bytes, std::string label, int device,
                                       stream_view stream) {
  auto* r = take_ref(bytes, device, stream);
  try {
    labels_->add(r, bytes, std::move(label));
  } catch (...) {
    detail::drop_ref(r);  // the caller's count: the block goes back
    throw;
  }
  r->parent->of(r).labelled = true;  // the caller's block: nobody else touches it now
  return r;
}

std::vector<labelled_block> block_allocator::labelled_blocks() const {
  return labels_->list();
}

std::optional<labelled_block> block_allocator::labelled_holding(const void* p,
                                                                std::size_t bytes) const {
  return labels_->holding(static_cast<const std::byte*>(p), bytes);
}

void block_allocator::record_labels_in(std::shared_ptr<event_history> history,
                                       std::uint64_t generation) noexcept {
  labels_->record_in(std::move(history), generation);
}

void block_allocator::put_back(block& b) noexcept {
  if (b.labelled) {  // forgotten before it is counted back: the record is alive until then
    b.labelled = false;
    labels_->remove(b.rec.id);
  }
  record_free(b);  // outside the lock: a backend call
  // Back to the shard it came from (not the releasing thread's): a block freed by the actor or
  // by another thread is the next one its own thread gets again, as on one free list.
  auto& home = shards_[b.shard];
  std::unique_lock lock(home.mutex);
  auto* s = b.rec.parent;
  // A block of a slab let go is not listed: its event is this thread's to destroy. It is taken
  // before push counts the block back, since once counted another thread's last block may
  // delete the slab (this block with it); the control block held keeps the backend, and the
  // allocator is held too: that slab may have held its last other ref, and `lock` is its.
  std::shared_ptr<detail::control_block> control;
  std::shared_ptr<block_allocator> keep;
  void* event = nullptr;
  if (s->let_go_done) {
    control = b.rec.control;
    keep = shared_from_this();  // alive: `s`, which refers to it, waits for this block
    event = std::exchange(b.event, nullptr);
  }
  const auto done = push(home, b);
  if (done == pushed::listed)
    return;
  const bool last = done == pushed::slab_gone_last;
  lock.unlock();
  if (event != nullptr)
    control->owning_backend().destroy_event(event);
  if (last)
    delete s;  // `keep` holds this allocator until the return
}

block_allocator::pushed block_allocator::push(detail::block_shard& sh, block& b) noexcept {
  auto* s = b.rec.parent;
  b.out.store(false, std::memory_order_relaxed);
  sh.in_use -= static_cast<std::int64_t>(s->block_bytes());
  sh.requested -= static_cast<std::int64_t>(b.requested);
  --sh.blocks;
  if (s->let_go_done)
    return s->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1 ? pushed::slab_gone_last
                                                                     : pushed::slab_gone;
  s->count_out(b.shard, -1);
  sh.list(b, s->size_class(), classes_);
  sh.free += static_cast<std::int64_t>(s->block_bytes());
  sh.events += b.event_recorded ? 1 : 0;
  return pushed::listed;
}

raw_release block_allocator::release_raw(void* ptr, std::size_t bytes, int device,
                                         stream_view stream) noexcept {
  block* b = nullptr;
  {
    const auto lock = registry_->lock();
    b = registry_->raw_block_at(ptr);
    if (b == nullptr)
      return raw_release::unknown_pointer;
    if (bytes != 0 && bytes != b->requested)
      return raw_release::size_mismatch;
    if (device != b->device)  // its free list is its device's: another would hand it out there
      return raw_release::device_mismatch;
    b->raw = false;  // a second release of the pointer is refused from now on
    b->stream = stream.handle;
    // The common case, in this one locked section: the caller's count is the only one (no ref
    // from ref_of can be taken now: it needs this lock and `raw`), no advice to reset, and the
    // slab is held (a raw block out keeps it: trim takes idle slabs only).
    if (b->rec.refs.load(std::memory_order_acquire) == 1 &&
        !b->rec.needs_reset.load(std::memory_order_acquire) && !b->rec.parent->let_go_done) {
      b->rec.refs.store(0, std::memory_order_relaxed);
      record_free(*b);
      auto& home = shards_[b->shard];
      std::lock_guard shard_lock(home.mutex);
      (void)push(home, *b);
      return raw_release::ok;
    }
  }
  // The caller's count: the block comes back on the last drop (a request may still hold a ref
  // from ref_of; an advised block goes through the actor first).
  detail::drop_ref(&b->rec);
  return raw_release::ok;
}

byte_ref block_allocator::ref_of(const void* ptr, std::size_t bytes) {
  const auto lock = registry_->lock();
  auto* b = registry_->raw_block_holding(ptr, bytes);
  if (b == nullptr)
    return {};
  detail::add_ref(&b->rec);
  const auto offset = static_cast<std::size_t>(static_cast<const std::byte*>(ptr) - b->rec.data);
  return detail::adopt_ref(&b->rec, offset, bytes);
}

block_stats block_allocator::stats() const {
  std::int64_t in_use = 0, requested = 0, free = 0, blocks = 0;
  block_stats out;
  {
    const auto lock = registry_->lock();
    out.slabs = registry_->count();
    out.slabs_held_bytes = registry_->bytes();
  }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  out.slab_bytes = out.slabs_held_bytes;  // the deprecated name, one more release
#pragma GCC diagnostic pop
  for (std::size_t i = 0; i < detail::block_shards; ++i) {
    const auto& sh = shards_[i];
    std::lock_guard lock(sh.mutex);
    in_use += sh.in_use;
    requested += sh.requested;
    free += sh.free;
    blocks += sh.blocks;
    out.hits += sh.hits;
    out.misses += sh.misses;
    out.cross_stream_reuses += sh.cross;
    out.events_recorded += sh.events;
  }
  const auto clamp = [](std::int64_t v) {
    return static_cast<std::uint64_t>(std::max<std::int64_t>(v, 0));
  };
  out.in_use_bytes = clamp(in_use);
  out.requested_bytes = clamp(requested);
  out.free_bytes = clamp(free);
  out.blocks_in_use = clamp(blocks);
  return out;
}

// -- giving back (what leaves the registry and the shards: memory/detail/give_back) ------------

std::uint64_t block_allocator::trim() {
  // Deleting the last slab may drop the last other ref to this allocator: hold one meanwhile.
  const auto keep = shared_from_this();
  detail::idle_slabs gone;
  {
    std::lock_guard grow_lock(grow_mutex_);
    const auto lock = registry_->lock();
    const auto shards = detail::lock_shards(shards_.get());
    gone = detail::idle_slabs::unlink(*registry_, shards_.get());
  }
  return gone.give_back();  // outside the locks: backend calls, and slabs deleted
}

void block_allocator::prepare_stop() noexcept {
  const auto lock = registry_->lock();
  registry_->unpin_idle();
}

void block_allocator::seal() noexcept {
  const auto lock = registry_->lock();  // a growth queues its slab under it, or sees closed_
  // A hand-out ends before the shards are all locked, or sees closed_.
  const auto shards = detail::lock_shards(shards_.get());
  closed_ = true;
}

void block_allocator::close() noexcept {
  const auto keep = shared_from_this();  // deleting slabs below may drop the last other ref
  const auto lock = registry_->lock();   // nothing else runs now: backend calls under it are fine
  const auto shards = detail::lock_shards(shards_.get());
  closed_ = true;
  detail::let_go_all(*registry_, shards_.get());
}

namespace detail {

// A block's way back to its allocator (declared beside the slab and the control block, which
// call it): the return path is the block allocator's.

void return_block(region* r) noexcept {
  r->parent->owner().put_back(r->parent->of(r));
}

void block_dropped(region* r) noexcept {
  // Advice the allocator applied must not reach the block's next user: the actor resets it and
  // gives the block back. Once the allocator is stopping nothing is queued and the block goes
  // straight back (its memory goes with its slab).
  if (r->needs_reset.load(std::memory_order_acquire) && r->control->enqueue_release(r->id))
    return;
  return_block(r);
}

}  // namespace detail

}  // namespace uma
