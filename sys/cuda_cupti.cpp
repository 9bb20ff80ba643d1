// The driver's unified-memory counters through CUPTI's activity API (sys/um_counters.hpp).
// CUPTI is loaded at run time (dlopen): a process without it, or a driver or platform that
// refuses the counters, gets a reason instead of a subscription, and uma keeps working.
//
// CUPTI's activity buffers are process-wide, so one collector serves every subscription: it
// enables the counters while at least one subscription lives, and its buffer-completed callback
// (a CUPTI thread, or the thread of a flush) copies each record into every subscription.

#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <cupti_activity.h>
#include <cupti_result.h>
#include <cupti_version.h>

#include <uma/sys/cuda_backend_impl.hpp>

namespace uma::detail {

namespace {

/// The CUPTI entry points uma uses, resolved from the loaded library.
struct cupti_api {
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityConfigureUnifiedMemoryCounter) configure = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiGetVersion) version = nullptr;
};

constexpr std::size_t buffer_bytes = std::size_t{1} << 20;
constexpr std::size_t buffer_alignment = 8;  // CUPTI's requirement for activity buffers

class cupti_subscription;

class cupti_collector {
 public:
  static cupti_collector& instance() {
    // Never destroyed: CUPTI may call back during process exit.
    static auto* collector = new cupti_collector;
    return *collector;
  }

  /// Adds `s` and starts the counters for the first one; an empty string, or why not.
  std::string add(cupti_subscription* s);
  void remove(cupti_subscription* s) noexcept;
  void flush() noexcept {
    if (api_.flush_all != nullptr)
      api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  [[nodiscard]] std::string source() const { return source_; }

 private:
  cupti_collector() = default;
  [[nodiscard]] std::string load();
  [[nodiscard]] std::string start();
  [[nodiscard]] std::string failed(const char* call, CUptiResult r) const;

  static void CUPTIAPI requested(std::uint8_t** buffer, std::size_t* size,
                                 std::size_t* max_records);
  static void CUPTIAPI completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer,
                                 std::size_t size, std::size_t valid);
  void deliver(std::vector<um_counter_record>&& records, std::uint64_t dropped);

  // state_mutex_ orders starting and stopping (CUPTI calls that may deliver buffers on this
  // thread); list_mutex_ guards the subscriptions, which delivery reads.
  std::mutex state_mutex_;
  std::mutex list_mutex_;
  std::vector<cupti_subscription*> subscriptions_;
  void* library_ = nullptr;
  std::string load_error_;
  cupti_api api_{};
  bool callbacks_registered_ = false;
  bool enabled_ = false;
  std::string source_;
};

class cupti_subscription final : public um_counter_subscription {
 public:
  ~cupti_subscription() override { cupti_collector::instance().remove(this); }

  std::vector<um_counter_record> drain() override {
    cupti_collector::instance().flush();  // delivers through completed(), into take()
    std::lock_guard lock(mutex_);
    return std::exchange(records_, {});
  }
  std::uint64_t dropped() const noexcept override {
    std::lock_guard lock(mutex_);
    return dropped_;
  }
  std::string source() const override { return cupti_collector::instance().source(); }

  void take(const std::vector<um_counter_record>& records, std::uint64_t dropped) {
    std::lock_guard lock(mutex_);
    const auto kept = std::min(records.size(), um_counter_bound - records_.size());
    records_.insert(records_.end(), records.begin(),
                    records.begin() + static_cast<std::ptrdiff_t>(kept));
    dropped_ += dropped + (records.size() - kept);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<um_counter_record> records_;
  std::uint64_t dropped_ = 0;
};

std::string cupti_collector::failed(const char* call, CUptiResult r) const {
  const char* text = nullptr;
  if (api_.result_string == nullptr || api_.result_string(r, &text) != CUPTI_SUCCESS ||
      text == nullptr)
    text = "unknown CUPTI error";
  return std::string(call) + " failed: " + text + " (" + std::to_string(static_cast<int>(r)) + ")";
}

std::string cupti_collector::load() {
  if (library_ != nullptr || !load_error_.empty())
    return load_error_;
  std::string tried;
  for (const char* name : {"libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13",
                           "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"}) {
    library_ = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library_ != nullptr)
      break;
    tried += std::string(tried.empty() ? "" : "; ") + ::dlerror();
  }
  if (library_ == nullptr)
    return load_error_ = "CUPTI could not be loaded: " + tried;
  bool all = true;
  const auto resolve = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(library_, symbol));
    all = all && fn != nullptr;
  };
  resolve(api_.enable, "cuptiActivityEnable");
  resolve(api_.disable, "cuptiActivityDisable");
  resolve(api_.flush_all, "cuptiActivityFlushAll");
  resolve(api_.next_record, "cuptiActivityGetNextRecord");
  resolve(api_.register_callbacks, "cuptiActivityRegisterCallbacks");
  resolve(api_.configure, "cuptiActivityConfigureUnifiedMemoryCounter");
  resolve(api_.dropped, "cuptiActivityGetNumDroppedRecords");
  resolve(api_.result_string, "cuptiGetResultString");
  resolve(api_.version, "cuptiGetVersion");
  if (!all) {
    api_ = {};
    return load_error_ = "the loaded CUPTI lacks an activity API entry point uma needs";
  }
  std::uint32_t version = 0;
  static_cast<void>(api_.version(&version));
  source_ = "CUPTI unified-memory counters (CUPTI API version " + std::to_string(version) + ")";
  return {};
}

std::string cupti_collector::start() {
  if (!callbacks_registered_) {
    if (auto r = api_.register_callbacks(&requested, &completed); r != CUPTI_SUCCESS)
      return failed("cuptiActivityRegisterCallbacks", r);
    callbacks_registered_ = true;
  }
  std::vector<CUpti_ActivityUnifiedMemoryCounterConfig> config;
  for (const auto kind : {CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
                          CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
                          CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT,
                          CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
                          CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING,
                          CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING,
                          CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP})
    config.push_back(
        {CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE, kind, 0, 1});
  if (auto r = api_.configure(config.data(), static_cast<std::uint32_t>(config.size()));
      r != CUPTI_SUCCESS)
    return failed("cuptiActivityConfigureUnifiedMemoryCounter", r);
  if (auto r = api_.enable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER); r != CUPTI_SUCCESS)
    return failed("cuptiActivityEnable(UNIFIED_MEMORY_COUNTER)", r);
  enabled_ = true;
  return {};
}

std::string cupti_collector::add(cupti_subscription* s) {
  std::lock_guard state(state_mutex_);
  if (auto why = load(); !why.empty())
    return why;
  if (!enabled_)
    if (auto why = start(); !why.empty())
      return why;
  std::lock_guard list(list_mutex_);
  subscriptions_.push_back(s);
  return {};
}

void cupti_collector::remove(cupti_subscription* s) noexcept {
  std::lock_guard state(state_mutex_);
  bool last = false;
  {
    std::lock_guard list(list_mutex_);
    const auto before = subscriptions_.size();
    std::erase(subscriptions_, s);
    last = before != subscriptions_.size() && subscriptions_.empty();
  }
  if (last && enabled_) {
    api_.disable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
    enabled_ = false;
    flush();  // hands CUPTI's buffers back (nobody takes their records)
  }
}

void CUPTIAPI cupti_collector::requested(std::uint8_t** buffer, std::size_t* size,
                                         std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(buffer_alignment, buffer_bytes));
  *size = *buffer != nullptr ? buffer_bytes : 0;
  *max_records = 0;  // as many as fit
}

um_counter_kind kind_of(CUpti_ActivityUnifiedMemoryCounterKind k, bool& known) {
  known = true;
  switch (k) {
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD:
      return um_counter_kind::to_device_bytes;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH:
      return um_counter_kind::to_host_bytes;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT:
      return um_counter_kind::cpu_page_fault;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT:
      return um_counter_kind::gpu_page_fault;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING:
      return um_counter_kind::thrashing;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING:
      return um_counter_kind::throttling;
    case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP:
      return um_counter_kind::remote_map;
    default:
      known = false;
      return um_counter_kind::to_device_bytes;
  }
}

void CUPTIAPI cupti_collector::completed(CUcontext context, std::uint32_t stream,
                                         std::uint8_t* buffer, std::size_t, std::size_t valid) {
  auto& self = instance();
  std::vector<um_counter_record> records;
  CUpti_Activity* record = nullptr;
  while (buffer != nullptr && self.api_.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER)
      continue;
    const auto* um = reinterpret_cast<const CUpti_ActivityUnifiedMemoryCounter3*>(record);
    bool known = false;
    const auto kind = kind_of(um->counterKind, known);
    if (!known)
      continue;
    const bool move =
        kind == um_counter_kind::to_device_bytes || kind == um_counter_kind::to_host_bytes;
    records.push_back({kind,
                       move && um->flags == CUPTI_ACTIVITY_UNIFIED_MEMORY_MIGRATION_CAUSE_USER,
                       um->address, kind == um_counter_kind::cpu_page_fault ? 1 : um->value});
  }
  std::size_t dropped = 0;
  if (self.api_.dropped(context, stream, &dropped) != CUPTI_SUCCESS)
    dropped = 0;
  self.deliver(std::move(records), dropped);
  std::free(buffer);
}

void cupti_collector::deliver(std::vector<um_counter_record>&& records, std::uint64_t dropped) {
  if (records.empty() && dropped == 0)
    return;
  std::lock_guard lock(list_mutex_);
  for (auto* s : subscriptions_)
    s->take(records, dropped);
}

}  // namespace

um_counter_source subscribe_cupti_um_counters() {
  auto s = std::make_unique<cupti_subscription>();
  if (auto why = cupti_collector::instance().add(s.get()); !why.empty()) {
    // Not added: its destructor's remove finds nothing to remove.
    return {nullptr, std::move(why)};
  }
  return {std::move(s), {}};
}

}  // namespace uma::detail
