#pragma once

// The C ABI's allocator object (the C++ side of `uma_allocator`, actors/c/uma.h): an actor
// system of its own, an allocator actor behind a client facade, and the allocator's block
// allocator handing out raw blocks. Requests above its largest size take the message path and
// are kept, pinned, in a table of their own. Internal to libuma_c; not installed.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <uma/c/uma.h>
#include <uma/actors/client.hpp>
#include <uma/memory/block_allocator.hpp>

struct uma_allocator {
  /// Makes the allocator from a validated config; throws uma::error.
  explicit uma_allocator(const uma_config& config);
  ~uma_allocator();
  uma_allocator(const uma_allocator&) = delete;
  uma_allocator& operator=(const uma_allocator&) = delete;

  [[nodiscard]] void* allocate(std::size_t size, int device, uma_stream stream);
  [[nodiscard]] uma_status release(void* ptr, std::size_t size, int device, uma_stream stream);
  /// The block (cached, large or a tier's) holding [ptr, ptr + bytes) as a ref; throws
  /// UMA_ERR_UNKNOWN_POINTER through `status_error` when none does.
  [[nodiscard]] uma::byte_ref ref_of(const void* ptr, std::size_t bytes);
  /// Memory of a tier (uma_host_alloc, uma_device_alloc: docs/c_abi.md "Tiers and copies"),
  /// held by its ref until release_tier or the stop, which frees it (unlike a large block, it is
  /// not pinned: uma_destroy frees it once the device synchronized). Throws uma::error.
  [[nodiscard]] void* allocate_tier(std::size_t size, uma::memory_kind kind, int device);
  /// Gives back what allocate_tier returned; UMA_ERR_UNKNOWN_POINTER for anything else.
  void release_tier(void* ptr);
  /// The block allocator's idle slabs back to the allocator, which frees them; returns the
  /// slabs' bytes.
  std::uint64_t trim();
  [[nodiscard]] uma_stats stats();
  [[nodiscard]] std::string stats_json();
  /// Stops the allocator (once) and gives everything back; fills `out` when given.
  void stop(uma_stop_report* out) noexcept;
  /// Validates `device` for this backend: -1 (host) or 0 to max(1, devices) - 1.
  void check_device(int device, const char* what) const;
  /// The stream as the backend may see it (the host backend has none: every token is null).
  [[nodiscard]] uma::stream_view stream_of(uma_stream stream) const noexcept;

  const uma_config config;
  std::shared_ptr<uma::backend> backend;
  std::unique_ptr<caf::actor_system_config> caf_config;
  std::unique_ptr<caf::actor_system> system;
  std::unique_ptr<uma::client> client;
  uma::block_allocator_ref cache;  ///< the allocator's block allocator

 private:
  struct large_block {
    uma::Pin<std::byte> pin;  // keeps the region from post_stop while the caller has it
    std::size_t requested;
    int device;  // what uma_malloc named: uma_free must name the same
  };
  std::mutex large_mutex_;
  std::map<std::uintptr_t, large_block> large_;  // by address
  std::mutex tier_mutex_;
  std::map<std::uintptr_t, uma::byte_ref> tiers_;  // by address
  bool stopped_ = false;
};

namespace uma::c {

/// The value a caller passed for a C enum, read without loading it as the enum: a C caller may
/// pass any int, and loading a value outside the enumerators' range is undefined in C++.
template <class E>
[[nodiscard]] long long raw(const E& e) noexcept {
  std::underlying_type_t<E> v;
  std::memcpy(&v, &e, sizeof v);
  return static_cast<long long>(v);
}

/// A failure with a C status (UMA_ERR_UNKNOWN_POINTER, UMA_ERR_NULL_ARGUMENT, ...).
struct status_error : std::exception {
  status_error(uma_status s, std::string m) : status(s), message(std::move(m)) {}
  [[nodiscard]] const char* what() const noexcept override { return message.c_str(); }
  uma_status status;
  std::string message;
};

/// Fills `config` from the UMA_* environment (docs/c_abi.md); throws status_error naming the
/// variable and its value when one is malformed.
void config_from_environment(uma_config& config);

/// Most CAF scheduler threads a C ABI allocator may ask for (each thread reserves a stack: a
/// thousand of them abort a process under a 4 GB address-space limit).
inline constexpr std::uint32_t max_scheduler_threads = 256;
/// Throws status_error for a config uma cannot honour (bad enum values, device budgets).
void validate(const uma_config& config);

/// The process's default allocator (uma_default_allocator) if it was made, else null.
[[nodiscard]] uma_allocator* default_allocator_if_made() noexcept;
/// The default allocator, made from the UMA_* environment on first use; null if that failed
/// (uma_last_error says why).
[[nodiscard]] uma_allocator* framework_allocator() noexcept;

}  // namespace uma::c
