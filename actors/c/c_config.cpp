#include <uma/actors/c/c_allocator.hpp>

#include <charconv>
#include <cstdlib>
#include <string_view>

namespace uma::c {

namespace {

std::uint64_t number(const char* name, std::string_view text) {
  std::uint64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end)
    throw status_error(UMA_ERR_INVALID_ARGUMENT, std::string(name) + "='" + std::string(text) +
                                                     "' is not a non-negative integer");
  return value;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

}  // namespace

void config_from_environment(uma_config& config) {
  if (const char* v = env("UMA_BACKEND")) {
    const std::string_view s(v);
    if (s == "auto")
      config.backend = UMA_BACKEND_AUTO;
    else if (s == "host")
      config.backend = UMA_BACKEND_HOST;
    else if (s == "cuda")
      config.backend = UMA_BACKEND_CUDA;
    else
      throw status_error(UMA_ERR_INVALID_ARGUMENT,
                         "UMA_BACKEND='" + std::string(s) + "' is not auto, host or cuda");
  }
  if (const char* v = env("UMA_POLICY")) {
    const std::string_view s(v);
    if (s == "direct")
      config.policy = UMA_POLICY_DIRECT;
    else if (s == "pool")
      config.policy = UMA_POLICY_POOL;
    else
      throw status_error(UMA_ERR_INVALID_ARGUMENT,
                         "UMA_POLICY='" + std::string(s) + "' is not direct or pool");
  }
  if (const char* v = env("UMA_QUOTA_BYTES"))
    config.quota_bytes = number("UMA_QUOTA_BYTES", v);
  if (const char* v = env("UMA_DEVICE_BUDGET_BYTES"))
    config.device_budget_bytes = number("UMA_DEVICE_BUDGET_BYTES", v);
  if (const char* v = env("UMA_DRIVER_COUNTERS")) {
    const auto on = number("UMA_DRIVER_COUNTERS", v);
    if (on > 1)
      throw status_error(UMA_ERR_INVALID_ARGUMENT,
                         "UMA_DRIVER_COUNTERS=" + std::to_string(on) + " is not 0 or 1");
    config.driver_counters = static_cast<std::uint32_t>(on);
  }
  // UMA_CACHE_MAX_BYTES is UMA_MAX_BLOCK_BYTES's name before issue 38, read for one more release
  // when the new one is not set.
  if (const char* v = env("UMA_MAX_BLOCK_BYTES"))
    config.max_block_bytes = number("UMA_MAX_BLOCK_BYTES", v);
  else if (const char* old = env("UMA_CACHE_MAX_BYTES"))
    config.max_block_bytes = number("UMA_CACHE_MAX_BYTES", old);
  if (const char* v = env("UMA_SCHEDULER_THREADS")) {
    const auto n = number("UMA_SCHEDULER_THREADS", v);
    if (n > max_scheduler_threads)
      throw status_error(UMA_ERR_INVALID_ARGUMENT, "UMA_SCHEDULER_THREADS=" + std::to_string(n) +
                                                       " is over the limit of " +
                                                       std::to_string(max_scheduler_threads));
    config.scheduler_threads = static_cast<std::uint32_t>(n);
  }
}

void validate(const uma_config& config) {
  if (config.struct_size < sizeof(std::uint32_t))
    throw status_error(UMA_ERR_INVALID_ARGUMENT,
                       "uma_config: struct_size " + std::to_string(config.struct_size) +
                           " is too small (fill it with uma_config_init)");
  const auto backend = raw(config.backend);
  if (backend < UMA_BACKEND_AUTO || backend > UMA_BACKEND_CUDA)
    throw status_error(UMA_ERR_INVALID_ARGUMENT, "uma_config: backend " + std::to_string(backend) +
                                                     " is not UMA_BACKEND_AUTO, _HOST or _CUDA");
  const auto policy = raw(config.policy);
  if (policy != UMA_POLICY_DIRECT && policy != UMA_POLICY_POOL)
    throw status_error(UMA_ERR_INVALID_ARGUMENT,
                       "uma_config: policy " + std::to_string(policy) +
                           " is not UMA_POLICY_DIRECT or UMA_POLICY_POOL");
  if (config.max_block_bytes > (std::uint64_t{1} << 40))
    throw status_error(
        UMA_ERR_INVALID_ARGUMENT,
        "uma_config: max_block_bytes " + std::to_string(config.max_block_bytes) + " is over 1 TiB");
  if (config.scheduler_threads > max_scheduler_threads)
    throw status_error(UMA_ERR_INVALID_ARGUMENT,
                       "uma_config: scheduler_threads " + std::to_string(config.scheduler_threads) +
                           " is over the limit of " + std::to_string(max_scheduler_threads));
  if (config.driver_counters > 1)
    throw status_error(
        UMA_ERR_INVALID_ARGUMENT,
        "uma_config: driver_counters " + std::to_string(config.driver_counters) + " is not 0 or 1");
  if (config.host_devices > static_cast<std::uint32_t>(uma::emulated_devices::max_count))
    throw status_error(UMA_ERR_INVALID_ARGUMENT,
                       "uma_config: host_devices " + std::to_string(config.host_devices) +
                           " is over the limit of " +
                           std::to_string(uma::emulated_devices::max_count));
}

}  // namespace uma::c
