#pragma once

// Reads the HTTP/2 frames of one connection as they pass uma's front on their way to gRPC
// (guarded_pipe.hpp), and says when the peer goes past a bound that gRPC 1.51 does not keep:
// control frames per second (PING and SETTINGS floods, RST_STREAM: the "rapid reset"), frames
// that carry nothing, the size of a header block, and the bytes of gRPC messages begun but not
// finished. gRPC holds those bytes in its one resource quota, shared by every connection: once
// it runs short it cancels streams of any connection, an honest tenant's session among them. The
// guard keeps them below the quota, per connection and per identity (unfinished_ledger), so the
// connection that pushes past pays. Only frame headers and the 5-byte prefixes of the messages
// in DATA frames are read; no byte is changed. The server's frames to the peer are read as well,
// for the streams gRPC ends (whose unfinished bytes it dropped).

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include <uma/actors/remote/wire/detail/unfinished_ledger.hpp>

namespace uma::detail {

/// One connection's guard; used by one thread (its front's).
class frame_guard {
 public:
  using clock_type = std::chrono::steady_clock;

  /// Guards a connection of `identity`, counting its unfinished bytes in `ledger` (which must
  /// outlive the guard).
  frame_guard(const frame_limits& limits, unfinished_ledger& ledger, std::string identity);
  frame_guard(const frame_guard&) = delete;
  frame_guard& operator=(const frame_guard&) = delete;
  /// Gives the connection's unfinished bytes back to the ledger.
  ~frame_guard();

  /// Reads `bytes`, the peer's next bytes to gRPC, arriving at `now`: `none` while they keep
  /// within bounds; else why the connection must close (and every later call says so too).
  [[nodiscard]] guard_reason from_peer(std::string_view bytes, clock_type::time_point now);
  /// Reads `bytes`, gRPC's next bytes to the peer: the streams gRPC ends drop their unfinished
  /// bytes.
  void from_server(std::string_view bytes);

  /// Bytes of messages begun and not finished on this connection.
  [[nodiscard]] std::uint64_t unfinished() const noexcept { return unfinished_; }

 private:
  /// A frame's 9-byte header, then its payload, read as it arrives.
  struct frame_cursor {
    std::array<unsigned char, 9> head{};
    std::size_t head_have = 0;
    std::uint32_t length = 0;
    std::uint8_t type = 0;
    std::uint8_t flags = 0;
    std::uint32_t stream = 0;
    std::uint32_t at = 0;       // payload bytes read so far
    std::uint32_t padding = 0;  // of a PADDED DATA frame, once its first byte is read
  };
  /// A stream's message under way: its 5-byte prefix, then its body.
  struct message_cursor {
    std::array<unsigned char, 5> prefix{};
    std::size_t prefix_have = 0;
    std::uint64_t body_left = 0;
    std::uint64_t unfinished = 0;  // bytes of it received (at most max_message_bytes + 5)
  };
  template <class OnHead, class OnPayload>
  void read_frames(frame_cursor& c, std::string_view bytes, OnHead on_head, OnPayload on_payload);
  [[nodiscard]] guard_reason peer_frame_head(const frame_cursor& c);
  [[nodiscard]] guard_reason count(std::uint32_t& counter, std::uint32_t limit, guard_reason r);
  [[nodiscard]] guard_reason peer_data(frame_cursor& c, std::string_view payload);
  [[nodiscard]] guard_reason message_bytes(std::uint32_t stream, std::string_view data);
  /// The stream ended (either side): its unfinished bytes are gone.
  void end_stream(std::uint32_t stream, bool by_server);
  [[nodiscard]] bool ended_by_server(std::uint32_t stream) const noexcept;
  void take_back(std::uint64_t bytes) noexcept;

  const frame_limits& limits_;
  unfinished_ledger& ledger_;
  std::string identity_;
  guard_reason closed_ = guard_reason::none;
  std::size_t preface_have_ = 0;
  frame_cursor from_peer_{};
  frame_cursor from_server_{};
  std::uint32_t header_block_ = 0;
  clock_type::time_point second_{};  // the start of the second the counters below count
  std::uint32_t pings_ = 0;
  std::uint32_t settings_ = 0;
  std::uint32_t resets_ = 0;
  std::uint32_t empty_ = 0;
  std::map<std::uint32_t, message_cursor> streams_;  // only those with a message under way
  std::uint64_t unfinished_ = 0;
  // Streams gRPC ended lately: DATA the peer sent before it learnt so opens no new message.
  std::array<std::uint32_t, 64> server_ended_{};
  std::size_t server_ended_next_ = 0;
};

}  // namespace uma::detail
