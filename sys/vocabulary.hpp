#pragma once

// uma's plain types at the sys layer, for code that names them without the backend interface:
// where memory is (location, memory_kind), what advice says, how an allocation attaches, which
// stream and which backend. memory/vocabulary.hpp adds the residency words.

#include <cstdint>

#include <uma/sys/advice.hpp>
#include <uma/sys/location.hpp>
#include <uma/sys/memory_kind.hpp>

namespace uma {

/// Which backend an allocator runs on.
enum class backend_kind : std::uint8_t { host = 1, cuda = 2 };

/// Which backend to choose: `automatic` takes CUDA when a device is usable, else host.
enum class backend_choice : std::uint8_t { automatic = 0, cuda = 1, host = 2 };

/// How a managed allocation is first attached (`cudaMemAttachGlobal` / `cudaMemAttachHost`).
enum class attach_flag : std::uint8_t { global = 1, host = 2 };

/// A non-owning CUDA stream (`cudaStream_t`); a null handle is the legacy default stream.
struct stream_view {
  void* handle = nullptr;
  friend constexpr bool operator==(stream_view, stream_view) = default;
  /// CUDA's `cudaStreamPerThread`: the calling thread's own default stream. uma's lanes use it
  /// for moves that name no stream, so that each lane's work runs on a stream of its own.
  [[nodiscard]] static stream_view per_thread() noexcept {
    return stream_view{reinterpret_cast<void*>(std::uintptr_t{2})};
  }
};

}  // namespace uma
