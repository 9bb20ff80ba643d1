#include <uma/actors/c/c_allocator.hpp>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/scheduler_tuning.hpp>
#include <uma/messages/register_types.hpp>
#include <uma/sys/detail/format.hpp>
#include <uma/sys/log.hpp>

namespace {

uma::allocator_config allocator_config_of(const uma_config& c,
                                          std::shared_ptr<uma::backend> backend) {
  uma::allocator_config out;
  if (c.device_budget_bytes != 0) {
    // The residency account's budget on every device (docs/residency.md; on the host backend
    // its emulated devices); the allocator refuses one above a device's memory.
    if (backend->device_count() == 0)
      throw uma::c::status_error(UMA_ERR_NOT_SUPPORTED,
                                 "uma_config: device_budget_bytes: the " +
                                     std::string(uma::to_string(backend->kind())) +
                                     " backend has no device whose residency to budget (host: "
                                     "host_devices is 0); leave it 0");
    for (int d = 0; d < backend->device_count(); ++d)
      out.residency.device_budgets.emplace_back(d, c.device_budget_bytes);
  }
  out.backend.instance = std::move(backend);
  out.memory.quota_bytes = c.quota_bytes;
  out.backend.driver_counters = c.driver_counters != 0;
  out.memory.policy =
      c.policy == UMA_POLICY_POOL ? uma::allocation_policy::pool : uma::allocation_policy::direct;
  // Only this allocator's own slabs and large blocks can be pinned, and no caller can give one
  // back while uma_destroy runs: waiting would change nothing. What is pinned is leaked at once.
  out.supervision.drain_timeout = std::chrono::milliseconds{0};
  // The largest block of the block allocator (uma_malloc above it takes the message path). By
  // default every size, as PyTorch's own allocator caches every size: a framework's largest
  // buffers come back every step (GPT-2's fp32 logits at 8192 tokens, 1.65 GB), and a region of
  // their own each time cost a cudaMallocManaged, first-touch faults on the device and a
  // cudaFree that synchronizes (H200: offload_bench steps of 282-316 ms against 33 native).
  out.memory.max_pooled_block = c.max_block_bytes != 0 ? c.max_block_bytes : std::size_t{1} << 40;
  // Its own thread: a miss or a range operation is answered without waiting for a scheduler
  // worker to wake up.
  out.supervision.detached = true;
  return out;
}

/// uma_free's refusal of a device other than the block's (`was`, when known).
std::string wrong_device(int device, std::optional<int> was = std::nullopt) {
  return "uma_free: device " + std::to_string(device) + " is not the device the block was " +
         "allocated for" + (was ? " (" + std::to_string(*was) + ")" : std::string{}) +
         "; nothing was freed";
}

uma::backend_choice choice_of(uma_backend_choice b) {
  switch (b) {
    case UMA_BACKEND_HOST:
      return uma::backend_choice::host;
    case UMA_BACKEND_CUDA:
      return uma::backend_choice::cuda;
    default:
      return uma::backend_choice::automatic;
  }
}

}  // namespace

uma_allocator::uma_allocator(const uma_config& c) : config(c) {
  backend = uma::make_backend(
      choice_of(c.backend),
      uma::emulated_devices{static_cast<int>(c.host_devices), c.host_device_bytes});
  caf_config = std::make_unique<caf::actor_system_config>();
  uma::register_types(*caf_config);
  uma::tune_scheduler(*caf_config);
  const auto threads = c.scheduler_threads == 0 ? 2u : c.scheduler_threads;
  caf_config->set("scheduler.max-threads", static_cast<caf::config_value::integer>(threads));
  system = std::make_unique<caf::actor_system>(*caf_config);
  client = std::make_unique<uma::client>(*system, allocator_config_of(c, backend));
  cache = client->blocks();
}

uma_allocator::~uma_allocator() {
  stop(nullptr);
}

void uma_allocator::check_device(int device, const char* what) const {
  const int devices = std::max(1, backend->device_count());
  if (device < UMA_DEVICE_HOST || device >= devices)
    throw uma::c::status_error(UMA_ERR_INVALID_ARGUMENT,
                               std::string(what) + ": device " + std::to_string(device) +
                                   " is not -1 (the host) or a device 0 to " +
                                   std::to_string(devices - 1) + " of the " +
                                   std::string(uma::to_string(backend->kind())) + " backend");
}

uma::stream_view uma_allocator::stream_of(uma_stream stream) const noexcept {
  if (backend->kind() == uma::backend_kind::host)
    return {};
  return {static_cast<void*>(stream)};
}

void* uma_allocator::allocate(std::size_t size, int device, uma_stream stream) {
  if (cache->serves(size))
    return cache->allocate_raw(size, device, {static_cast<void*>(stream)});
  auto ref = client->allocate<std::byte>(size);
  auto pin = ref.pin();
  void* p = pin.data();
  std::lock_guard lock(large_mutex_);
  large_.emplace(reinterpret_cast<std::uintptr_t>(p), large_block{std::move(pin), size, device});
  return p;
}

uma_status uma_allocator::release(void* ptr, std::size_t size, int device, uma_stream stream) {
  switch (cache->release_raw(ptr, size, device, {static_cast<void*>(stream)})) {
    case uma::raw_release::ok:
      return UMA_OK;
    case uma::raw_release::size_mismatch:
      throw uma::c::status_error(UMA_ERR_INVALID_ARGUMENT,
                                 "uma_free: size " + std::to_string(size) +
                                     " is not the size the block was allocated with");
    case uma::raw_release::device_mismatch:
      throw uma::c::status_error(UMA_ERR_INVALID_ARGUMENT, wrong_device(device));
    case uma::raw_release::unknown_pointer:
      break;
  }
  std::optional<uma::Pin<std::byte>> dropped;  // released outside the lock
  {
    std::lock_guard lock(large_mutex_);
    auto it = large_.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == large_.end())
      throw uma::c::status_error(UMA_ERR_UNKNOWN_POINTER,
                                 "uma_free: " + uma::detail::hex(ptr) +
                                     " is not a live block of this allocator (never handed "
                                     "out, freed already, or not its start)");
    if (size != 0 && size != it->second.requested)
      throw uma::c::status_error(UMA_ERR_INVALID_ARGUMENT,
                                 "uma_free: size " + std::to_string(size) + " but the block has " +
                                     std::to_string(it->second.requested) + " bytes");
    if (device != it->second.device)
      throw uma::c::status_error(UMA_ERR_INVALID_ARGUMENT, wrong_device(device, it->second.device));
    dropped.emplace(std::move(it->second.pin));
    large_.erase(it);
  }
  return UMA_OK;
}

void* uma_allocator::allocate_tier(std::size_t size, uma::memory_kind kind, int device) {
  auto ref = client->allocate<std::byte>(size, {.kind = kind, .device = device});
  void* p = ref.data();
  std::lock_guard lock(tier_mutex_);
  tiers_.emplace(reinterpret_cast<std::uintptr_t>(p), std::move(ref));
  return p;
}

void uma_allocator::release_tier(void* ptr) {
  std::optional<uma::byte_ref> dropped;  // released outside the lock
  std::lock_guard lock(tier_mutex_);
  auto it = tiers_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == tiers_.end())
    throw uma::c::status_error(UMA_ERR_UNKNOWN_POINTER,
                               "uma_tier_free: " + uma::detail::hex(ptr) +
                                   " is not a live tier block of this allocator (never handed "
                                   "out by uma_host_alloc or uma_device_alloc, freed already, or "
                                   "not its start)");
  dropped.emplace(std::move(it->second));
  tiers_.erase(it);
}

std::uint64_t uma_allocator::trim() {
  // The actor's trim trims the same block allocator again (what came free meanwhile) and
  // replies once the general lane has freed both trims' slabs.
  const auto bytes = cache->trim();
  return bytes + client->trim();
}

uma::byte_ref uma_allocator::ref_of(const void* ptr, std::size_t bytes) {
  if (auto ref = cache->ref_of(ptr, bytes); !ref.empty())
    return ref;
  const auto a = reinterpret_cast<std::uintptr_t>(ptr);
  // The ref of `map`'s block holding the range, if one does (`ref_in(entry)` gives its ref).
  const auto inside = [&](const auto& map, auto ref_in) -> std::optional<uma::byte_ref> {
    auto it = map.upper_bound(a);
    if (it == map.begin())
      return std::nullopt;
    --it;
    const uma::byte_ref& ref = ref_in(it->second);
    const auto off = a - it->first;
    if (off < ref.bytes() && bytes <= ref.bytes() - off)
      return ref.subview(off, bytes);
    return std::nullopt;
  };
  {
    std::lock_guard lock(large_mutex_);
    if (auto ref = inside(large_,
                          [](const large_block& b) -> const uma::byte_ref& { return b.pin.ref(); }))
      return std::move(*ref);
  }
  {
    std::lock_guard lock(tier_mutex_);
    if (auto ref = inside(tiers_, [](const uma::byte_ref& r) -> const uma::byte_ref& { return r; }))
      return std::move(*ref);
  }
  throw uma::c::status_error(UMA_ERR_UNKNOWN_POINTER,
                             "range [" + uma::detail::hex(ptr) + ", +" + std::to_string(bytes) +
                                 ") does not lie inside one live block of this allocator");
}

void uma_allocator::stop(uma_stop_report* out) noexcept {
  if (stopped_)
    return;
  stopped_ = true;
  std::uint64_t outstanding = 0;
  try {
    outstanding = cache->stats().blocks_in_use + large_.size();
    cache->prepare_stop();         // idle slabs unpinned: post_stop frees them
    auto report = client->stop();  // post_stop closed the block allocator: raw blocks given up
    cache.reset();
    large_.clear();  // the pins of leaked large blocks
    tiers_.clear();  // inert refs: post_stop freed their memory
    if (out != nullptr && report) {
      uma_stop_report r{};
      r.struct_size = out->struct_size;
      r.regions_freed = report->stop.regions_freed;
      r.bytes_freed = report->stop.bytes_freed;
      r.regions_leaked = report->stop.regions_leaked;
      r.bytes_leaked = report->stop.bytes_leaked;
      r.blocks_outstanding = outstanding;
      std::memcpy(out, &r, std::min<std::size_t>(out->struct_size, sizeof r));
    }
    client.reset();
    system.reset();
  } catch (const std::exception& e) {
    uma::log(uma::log_level::error, std::string("uma_destroy: ") + e.what());
  }
  if (outstanding != 0)
    uma::log(uma::log_level::warning,
             "uma_destroy: " + std::to_string(outstanding) +
                 " block(s) were still handed out; their memory is leaked, not freed");
}
