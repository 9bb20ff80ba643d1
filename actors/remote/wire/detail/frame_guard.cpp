#include <uma/actors/remote/wire/detail/frame_guard.hpp>

#include <algorithm>
#include <cstring>
#include <utility>

namespace uma::detail {

namespace {

// HTTP/2 (RFC 9113): the frame types and flags the guard reads.
constexpr std::uint8_t data_frame = 0;
constexpr std::uint8_t headers_frame = 1;
constexpr std::uint8_t priority_frame = 2;
constexpr std::uint8_t rst_stream_frame = 3;
constexpr std::uint8_t settings_frame = 4;
constexpr std::uint8_t ping_frame = 6;
constexpr std::uint8_t goaway_frame = 7;
constexpr std::uint8_t window_update_frame = 8;
constexpr std::uint8_t continuation_frame = 9;
constexpr std::uint8_t end_stream_flag = 0x1;
constexpr std::uint8_t ack_flag = 0x1;
constexpr std::uint8_t end_headers_flag = 0x4;
constexpr std::uint8_t padded_flag = 0x8;
constexpr std::string_view preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

[[nodiscard]] std::uint32_t big_endian(const unsigned char* p, std::size_t n) noexcept {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < n; ++i)
    v = (v << 8) | p[i];
  return v;
}

}  // namespace

frame_guard::frame_guard(const frame_limits& limits, unfinished_ledger& ledger,
                         std::string identity)
    : limits_(limits), ledger_(ledger), identity_(std::move(identity)) {}

frame_guard::~frame_guard() {
  ledger_.remove(identity_, unfinished_, unfinished_);
}

template <class OnHead, class OnPayload>
void frame_guard::read_frames(frame_cursor& c, std::string_view bytes, OnHead on_head,
                              OnPayload on_payload) {
  while (!bytes.empty() && closed_ == guard_reason::none) {
    if (c.head_have < c.head.size()) {
      const auto n = std::min(c.head.size() - c.head_have, bytes.size());
      std::memcpy(c.head.data() + c.head_have, bytes.data(), n);
      c.head_have += n;
      bytes.remove_prefix(n);
      if (c.head_have < c.head.size())
        return;
      c.length = big_endian(c.head.data(), 3);
      c.type = c.head[3];
      c.flags = c.head[4];
      c.stream = big_endian(c.head.data() + 5, 4) & 0x7fffffffu;
      c.at = 0;
      c.padding = 0;
      closed_ = on_head(c);
      if (c.length == 0)
        c.head_have = 0;
      continue;
    }
    const auto n = std::min<std::size_t>(c.length - c.at, bytes.size());
    closed_ = on_payload(c, bytes.substr(0, n));
    c.at += static_cast<std::uint32_t>(n);
    bytes.remove_prefix(n);
    if (c.at == c.length)
      c.head_have = 0;
  }
}

guard_reason frame_guard::from_peer(std::string_view bytes, clock_type::time_point now) {
  if (closed_ != guard_reason::none)
    return closed_;
  if (preface_have_ < preface.size()) {
    const auto n = std::min(preface.size() - preface_have_, bytes.size());
    if (bytes.substr(0, n) != preface.substr(preface_have_, n))
      return closed_ = guard_reason::not_http2;
    preface_have_ += n;
    bytes.remove_prefix(n);
  }
  if (now - second_ >= std::chrono::seconds(1)) {
    second_ = now;
    pings_ = settings_ = resets_ = empty_ = 0;
  }
  read_frames(
      from_peer_, bytes, [this](const frame_cursor& c) { return peer_frame_head(c); },
      [this](frame_cursor& c, std::string_view payload) { return peer_data(c, payload); });
  return closed_;
}

void frame_guard::from_server(std::string_view bytes) {
  const auto closed = std::exchange(closed_, guard_reason::none);  // read on after a refusal
  read_frames(
      from_server_, bytes,
      [this](const frame_cursor& c) {
        if (c.type == rst_stream_frame ||
            (c.type == headers_frame && (c.flags & end_stream_flag) != 0))
          end_stream(c.stream, true);
        return guard_reason::none;
      },
      [](frame_cursor&, std::string_view) { return guard_reason::none; });
  closed_ = closed;
}

guard_reason frame_guard::count(std::uint32_t& counter, std::uint32_t limit, guard_reason r) {
  return ++counter > limit ? r : guard_reason::none;
}

guard_reason frame_guard::peer_frame_head(const frame_cursor& c) {
  const bool empty = c.length == 0;
  switch (c.type) {
    case data_frame:
      if (empty && (c.flags & end_stream_flag) != 0)
        end_stream(c.stream, false);
      return empty && (c.flags & end_stream_flag) == 0
                 ? count(empty_, limits_.empty_frames_per_second, guard_reason::empty_frames)
                 : guard_reason::none;
    case headers_frame:
    case continuation_frame:
      header_block_ = c.type == headers_frame ? c.length : header_block_ + c.length;
      if (header_block_ > limits_.header_block_bytes)
        return guard_reason::header_block;
      if ((c.flags & end_headers_flag) != 0)
        header_block_ = 0;
      if (c.type == headers_frame && (c.flags & end_stream_flag) != 0)
        end_stream(c.stream, false);
      return empty && (c.flags & end_headers_flag) == 0
                 ? count(empty_, limits_.empty_frames_per_second, guard_reason::empty_frames)
                 : guard_reason::none;
    case rst_stream_frame:
      end_stream(c.stream, false);
      return count(resets_, limits_.resets_per_second, guard_reason::resets);
    case settings_frame:
      return (c.flags & ack_flag) != 0
                 ? guard_reason::none
                 : count(settings_, limits_.settings_per_second, guard_reason::settings);
    case ping_frame:
      return (c.flags & ack_flag) != 0
                 ? guard_reason::none
                 : count(pings_, limits_.pings_per_second, guard_reason::pings);
    case goaway_frame:
    case window_update_frame:
      return guard_reason::none;
    case priority_frame:
    default:  // PUSH_PROMISE (a client may not send it) and types HTTP/2 does not define
      return count(empty_, limits_.empty_frames_per_second, guard_reason::empty_frames);
  }
}

guard_reason frame_guard::peer_data(frame_cursor& c, std::string_view payload) {
  if (c.type != data_frame)
    return guard_reason::none;
  const bool last = c.at + payload.size() == c.length;
  std::uint32_t at = c.at;
  if ((c.flags & padded_flag) != 0) {
    if (at == 0) {
      // A pad longer than the frame is gRPC's to refuse (it ends the connection).
      c.padding = std::min<std::uint32_t>(static_cast<unsigned char>(payload[0]), c.length - 1);
      payload.remove_prefix(1);
      at = 1;
    }
    const std::uint32_t data_end = c.length - c.padding;
    payload = at >= data_end ? std::string_view{} : payload.substr(0, data_end - at);
  }
  const auto r = payload.empty() ? guard_reason::none : message_bytes(c.stream, payload);
  if (r == guard_reason::none && last && (c.flags & end_stream_flag) != 0)
    end_stream(c.stream, false);
  return r;
}

guard_reason frame_guard::message_bytes(std::uint32_t stream, std::string_view data) {
  auto it = streams_.find(stream);
  if (it == streams_.end()) {
    if (stream == 0 || ended_by_server(stream))
      return guard_reason::none;  // gRPC drops these bytes
    if (streams_.size() >= limits_.streams_with_unfinished)
      return guard_reason::streams;
    it = streams_.emplace(stream, message_cursor{}).first;
  }
  auto& m = it->second;
  const auto before = m.unfinished;
  const auto most = limits_.max_message_bytes + m.prefix.size();
  while (!data.empty()) {
    std::size_t n = 0;
    if (m.prefix_have < m.prefix.size()) {
      n = std::min(m.prefix.size() - m.prefix_have, data.size());
      std::memcpy(m.prefix.data() + m.prefix_have, data.data(), n);
      if ((m.prefix_have += n) == m.prefix.size())
        m.body_left = big_endian(m.prefix.data() + 1, 4);
    } else {
      n = static_cast<std::size_t>(std::min<std::uint64_t>(m.body_left, data.size()));
      m.body_left -= n;
    }
    data.remove_prefix(n);
    m.unfinished = std::min<std::uint64_t>(m.unfinished + n, most);
    if (m.prefix_have == m.prefix.size() && m.body_left == 0)
      m = message_cursor{};  // a whole message: gRPC hands it on
  }
  const auto after = m.unfinished;
  if (after == 0 && m.prefix_have == 0)
    streams_.erase(it);
  if (after < before) {
    take_back(before - after);
    return guard_reason::none;
  }
  const auto more = after - before;
  if (unfinished_ + more > limits_.unfinished_per_connection)
    return guard_reason::unfinished;
  if (const auto r = ledger_.add(identity_, unfinished_, more); r != guard_reason::none)
    return r;
  unfinished_ += more;
  return guard_reason::none;
}

void frame_guard::end_stream(std::uint32_t stream, bool by_server) {
  if (by_server) {
    server_ended_[server_ended_next_] = stream;
    server_ended_next_ = (server_ended_next_ + 1) % server_ended_.size();
  }
  if (const auto it = streams_.find(stream); it != streams_.end()) {
    take_back(it->second.unfinished);
    streams_.erase(it);
  }
}

bool frame_guard::ended_by_server(std::uint32_t stream) const noexcept {
  return std::find(server_ended_.begin(), server_ended_.end(), stream) != server_ended_.end();
}

void frame_guard::take_back(std::uint64_t bytes) noexcept {
  ledger_.remove(identity_, unfinished_, bytes);
  unfinished_ -= bytes;
}

}  // namespace uma::detail
