// The C entry points of actors/c/uma.h. Every one catches everything: no exception crosses into
// C, and a failure becomes a status plus this thread's last-error message.

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>

#include <uma/actors/c/c_allocator.hpp>
#include <uma/actors/c/c_guard.hpp>

namespace {

using uma::c::fail;
using uma::c::guarded;
using uma::c::require;
using uma::c::status_error;

/// `in` (of the caller's struct_size) over the defaults.
uma_config config_of(const uma_config* in) {
  uma_config c;
  uma_config_init(&c);
  if (in == nullptr)
    return c;
  if (in->struct_size < sizeof(std::uint32_t))
    throw status_error(UMA_ERR_INVALID_ARGUMENT,
                       "uma_config: struct_size " + std::to_string(in->struct_size) +
                           " is too small (fill it with uma_config_init)");
  std::memcpy(&c, in, std::min<std::size_t>(in->struct_size, sizeof c));
  c.struct_size = sizeof c;
  uma::c::validate(c);
  return c;
}

bool same(const uma_config& a, const uma_config& b) noexcept {
  return a.backend == b.backend && a.policy == b.policy && a.quota_bytes == b.quota_bytes &&
         a.device_budget_bytes == b.device_budget_bytes && a.max_block_bytes == b.max_block_bytes &&
         a.scheduler_threads == b.scheduler_threads && a.host_devices == b.host_devices &&
         a.host_device_bytes == b.host_device_bytes && a.driver_counters == b.driver_counters;
}

std::mutex default_mutex;  // makes and replaces the default allocator
// Read without the mutex by the framework entry points; never destroyed at exit (see
// docs/c_abi.md).
std::atomic<uma_allocator*> default_allocator{nullptr};

}  // namespace

extern "C" {

void uma_config_init(uma_config* config) {
  if (config == nullptr)
    return;
  *config = uma_config{};
  config->struct_size = sizeof(uma_config);
  config->backend = UMA_BACKEND_AUTO;
  config->policy = UMA_POLICY_POOL;
  config->host_devices = 1;
}

uma_status uma_create(const uma_config* config, uma_allocator** out) {
  return guarded([&] {
    require(out, "uma_create: out");
    const auto c = config_of(config);
    *out = new uma_allocator(c);
    return UMA_OK;
  });
}

uma_status uma_destroy_with_report(uma_allocator* allocator, uma_stop_report* out) {
  return guarded([&] {
    if (allocator == nullptr)
      return UMA_OK;
    const bool bad_report = out != nullptr && out->struct_size < sizeof(std::uint32_t);
    {
      std::lock_guard lock(default_mutex);
      if (allocator == default_allocator.load())
        default_allocator.store(nullptr);  // the next uma_default_allocator makes a new one
    }
    allocator->stop(bad_report ? nullptr : out);
    delete allocator;
    if (bad_report)  // destroyed all the same: the caller cannot use it again either way
      throw status_error(UMA_ERR_INVALID_ARGUMENT,
                         "uma_destroy_with_report: out->struct_size is not set (the allocator "
                         "was destroyed; no report written)");
    return UMA_OK;
  });
}

uma_status uma_destroy(uma_allocator* allocator) {
  return uma_destroy_with_report(allocator, nullptr);
}

uma_status uma_malloc(uma_allocator* allocator, size_t size, int device, uma_stream stream,
                      void** out) {
  return guarded([&] {
    require(allocator, "uma_malloc: allocator");
    require(out, "uma_malloc: out");
    *out = nullptr;
    if (size == 0)
      return UMA_OK;
    allocator->check_device(device, "uma_malloc");
    *out = allocator->allocate(size, device, stream);
    return UMA_OK;
  });
}

uma_status uma_free(uma_allocator* allocator, void* ptr, size_t size, int device,
                    uma_stream stream) {
  return guarded([&] {
    require(allocator, "uma_free: allocator");
    if (ptr == nullptr)
      return UMA_OK;  // what uma_malloc gives for size 0
    allocator->check_device(device, "uma_free");
    return allocator->release(ptr, size, device, stream);
  });
}

uma_status uma_prefetch(uma_allocator* allocator, const void* ptr, size_t bytes, int device,
                        uma_stream stream) {
  return guarded([&] {
    require(allocator, "uma_prefetch: allocator");
    require(ptr, "uma_prefetch: ptr");
    allocator->check_device(device, "uma_prefetch");
    auto ref = allocator->ref_of(ptr, bytes);
    const auto loc =
        device == UMA_DEVICE_HOST ? uma::location::host() : uma::location::device(device);
    (void)allocator->client->prefetch({std::move(ref)}, {loc}, allocator->stream_of(stream));
    return UMA_OK;
  });
}

uma_status uma_advise(uma_allocator* allocator, const void* ptr, size_t bytes, uma_advice advice,
                      int device) {
  return guarded([&] {
    require(allocator, "uma_advise: allocator");
    require(ptr, "uma_advise: ptr");
    const auto what = uma::c::raw(advice);
    if (what < UMA_ADVICE_SET_READ_MOSTLY || what > UMA_ADVICE_UNSET_ACCESSED_BY)
      throw status_error(UMA_ERR_INVALID_ARGUMENT, "uma_advise: advice " + std::to_string(what) +
                                                       " is not a uma_advice value");
    allocator->check_device(device, "uma_advise");
    auto ref = allocator->ref_of(ptr, bytes);
    const auto loc =
        device == UMA_DEVICE_HOST ? uma::location::host() : uma::location::device(device);
    (void)allocator->client->advise({std::move(ref)}, static_cast<uma::advice>(what), loc);
    return UMA_OK;
  });
}

uma_status uma_discard(uma_allocator* allocator, const void* ptr, size_t bytes, uma_stream stream) {
  return guarded([&] {
    require(allocator, "uma_discard: allocator");
    require(ptr, "uma_discard: ptr");
    auto ref = allocator->ref_of(ptr, bytes);
    (void)allocator->client->discard({std::move(ref)}, allocator->stream_of(stream));
    return UMA_OK;
  });
}

uma_status uma_get_stats(uma_allocator* allocator, uma_stats* out) {
  return guarded([&] {
    require(allocator, "uma_get_stats: allocator");
    require(out, "uma_get_stats: out");
    const auto size = out->struct_size;
    if (size < sizeof(std::uint32_t))
      throw status_error(
          UMA_ERR_INVALID_ARGUMENT,
          "uma_get_stats: out->struct_size is not set (set it to sizeof(uma_stats))");
    auto s = allocator->stats();
    s.struct_size = static_cast<std::uint32_t>(std::min<std::size_t>(size, sizeof s));
    std::memcpy(out, &s, std::min<std::size_t>(size, sizeof s));
    return UMA_OK;
  });
}

uma_status uma_stats_json(uma_allocator* allocator, char* buffer, size_t capacity, size_t* needed) {
  return guarded([&] {
    require(allocator, "uma_stats_json: allocator");
    return uma::c::copy_json(allocator->stats_json(), buffer, capacity, needed, "uma_stats_json");
  });
}

uma_status uma_set_quota(uma_allocator* allocator, uint64_t quota_bytes) {
  return guarded([&] {
    require(allocator, "uma_set_quota: allocator");
    if (quota_bytes == 0)
      throw status_error(UMA_ERR_INVALID_ARGUMENT, "uma_set_quota: a quota of 0 bytes");
    (void)allocator->client->quota(quota_bytes);
    return UMA_OK;
  });
}

uma_status uma_trim(uma_allocator* allocator, uint64_t* released_bytes) {
  return guarded([&] {
    require(allocator, "uma_trim: allocator");
    const auto bytes = allocator->trim();
    if (released_bytes != nullptr)
      *released_bytes = bytes;
    return UMA_OK;
  });
}

const char* uma_status_string(uma_status status) {
  switch (uma::c::raw(status)) {
#define UMA_C_NAME(s) \
  case s:             \
    return #s;
    UMA_C_NAME(UMA_OK)
    UMA_C_NAME(UMA_ERR_OUT_OF_MEMORY)
    UMA_C_NAME(UMA_ERR_QUOTA_EXCEEDED)
    UMA_C_NAME(UMA_ERR_INVALID_ARGUMENT)
    UMA_C_NAME(UMA_ERR_ALLOCATOR_STOPPED)
    UMA_C_NAME(UMA_ERR_CAPTURE_IN_PROGRESS)
    UMA_C_NAME(UMA_ERR_NOT_SUPPORTED)
    UMA_C_NAME(UMA_ERR_NO_DEVICE)
    UMA_C_NAME(UMA_ERR_BACKEND)
    UMA_C_NAME(UMA_ERR_OVERFLOW)
    UMA_C_NAME(UMA_ERR_CONTEXT_LOST)
    UMA_C_NAME(UMA_ERR_UNRECOVERABLE)
    UMA_C_NAME(UMA_ERR_TIMEOUT)
    UMA_C_NAME(UMA_ERR_UNKNOWN_POINTER)
    UMA_C_NAME(UMA_ERR_NULL_ARGUMENT)
    UMA_C_NAME(UMA_ERR_BUFFER_TOO_SMALL)
#undef UMA_C_NAME
  }
  return "UMA_ERR_UNKNOWN_STATUS";
}

const char* uma_last_error(void) {
  return uma::c::last_error().c_str();
}

uma_status uma_default_allocator(const uma_config* config, uma_allocator** out) {
  return guarded([&] {
    require(out, "uma_default_allocator: out");
    std::lock_guard lock(default_mutex);
    auto* existing = default_allocator.load();
    if (existing != nullptr && config == nullptr) {
      *out = existing;
      return UMA_OK;
    }
    uma_config c;
    if (config != nullptr) {
      c = config_of(config);
    } else {
      uma_config_init(&c);
      uma::c::config_from_environment(c);
      uma::c::validate(c);
    }
    if (existing != nullptr && !same(c, existing->config))
      throw status_error(UMA_ERR_INVALID_ARGUMENT,
                         "uma_default_allocator: the default allocator exists already with "
                         "another config");
    if (existing == nullptr) {
      existing = new uma_allocator(c);
      default_allocator.store(existing);
    }
    *out = existing;
    return UMA_OK;
  });
}

}  // extern "C"

namespace uma::c {

uma_allocator* default_allocator_if_made() noexcept {
  return default_allocator.load(std::memory_order_acquire);
}

uma_allocator* framework_allocator() noexcept {
  if (auto* a = default_allocator_if_made())
    return a;
  uma_allocator* a = nullptr;
  return uma_default_allocator(nullptr, &a) == UMA_OK ? a : nullptr;
}

}  // namespace uma::c
