#pragma once

// The bounds of uma's front on what a peer sends (frame_limits, kept by each connection's
// frame_guard), and the one count they share across connections: the bytes of gRPC messages
// begun and not finished, per identity and in all.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace uma::detail {

/// What the front's frame guards let a peer do (docs/distributed.md "Bounds").
struct frame_limits {
  std::uint32_t pings_per_second = 100;     ///< PING frames (not acknowledgements)
  std::uint32_t settings_per_second = 100;  ///< SETTINGS frames (not acknowledgements)
  std::uint32_t resets_per_second = 200;    ///< RST_STREAM frames: streams the peer cancelled
  /// Frames that carry nothing gRPC acts on: PRIORITY, empty DATA without END_STREAM, empty
  /// header fragments, frame types HTTP/2 does not define.
  std::uint32_t empty_frames_per_second = 1000;
  std::uint32_t header_block_bytes = 64u << 10;  ///< one HEADERS frame and its CONTINUATIONs
  std::uint32_t streams_with_unfinished = 256;   ///< streams holding part of a message at once
  /// Bytes of messages begun and not finished: of one connection, of one identity's connections
  /// together, and of every connection of the front together (where an identity is closed only
  /// while it holds more than an even share of this among those holding any).
  std::uint64_t unfinished_per_connection = 8u << 20;
  std::uint64_t unfinished_per_identity = 16u << 20;
  std::uint64_t unfinished_total = 32u << 20;
  /// gRPC refuses a message declared larger than this, so it never holds more of one.
  std::uint64_t max_message_bytes = 4u << 20;
};

/// Why a guard closed its connection.
enum class guard_reason : std::uint8_t {
  none,
  not_http2,       ///< the peer's first bytes are not HTTP/2's connection preface
  pings,           ///< past pings_per_second
  settings,        ///< past settings_per_second
  resets,          ///< past resets_per_second
  empty_frames,    ///< past empty_frames_per_second
  header_block,    ///< past header_block_bytes
  streams,         ///< past streams_with_unfinished
  unfinished,      ///< past unfinished_per_connection
  identity_share,  ///< past unfinished_per_identity, or past its share of unfinished_total
};
inline constexpr std::size_t guard_reason_count = 10;

/// The name of `r` in log lines and in `/metrics` (`reason="pings"`).
[[nodiscard]] std::string_view to_string(guard_reason r) noexcept;

/// Unfinished message bytes per identity across the connections of every front (thread-safe).
/// Past a bound, a connection is refused only while it holds more than an even share: past
/// `unfinished_per_identity`, of its identity's bytes among the identity's connections holding
/// any; past `unfinished_total`, its identity of all bytes among the identities holding any. So
/// the connection that fills the server pays, and one that asks for a little goes on; the most
/// held at once is therefore twice each bound.
class unfinished_ledger {
 public:
  explicit unfinished_ledger(const frame_limits& limits) : limits_(limits) {}
  /// A connection of `identity` that holds `held` bytes would hold `bytes` more: `none` when
  /// they are added, else `identity_share` (and nothing is added).
  [[nodiscard]] guard_reason add(const std::string& identity, std::uint64_t held,
                                 std::uint64_t bytes);
  /// A connection of `identity` that held `held` bytes lets `bytes` of them go (a message
  /// finished, a stream or the connection ended).
  void remove(const std::string& identity, std::uint64_t held, std::uint64_t bytes) noexcept;
  /// Bytes of every identity together.
  [[nodiscard]] std::uint64_t total() const;
  /// Bytes of `identity`'s connections together.
  [[nodiscard]] std::uint64_t of(const std::string& identity) const;

 private:
  struct holding {
    std::uint64_t bytes = 0;
    std::uint32_t connections = 0;  // of the identity's, those holding any
  };
  const frame_limits limits_;
  mutable std::mutex mutex_;
  std::map<std::string, holding, std::less<>> by_identity_;  // none holding 0 bytes
  std::uint64_t total_ = 0;
};

}  // namespace uma::detail
