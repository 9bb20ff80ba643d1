// The HTTP/2 part of uma_wire_fuzz (its first byte 10): the bytes that reach the wire's front
// before gRPC, read by the frame guards of three connections (two of one identity, one of
// another) that share one ledger of unfinished message bytes
// (actors/remote/wire/detail/frame_guard.hpp). The input is a sequence of chunks, each a header
// byte (bit 7: gRPC's bytes to the peer rather than the peer's; bits 0-1: the connection; bits 2-6:
// tenths of a second that pass first), a length byte and that many bytes. Bounds are small so that
// the fuzzer reaches them. After every chunk:
//   * the ledger holds exactly what the connections hold, per identity and in all;
//   * no connection holds more than its bound, no identity or total more than twice its own;
//   * a connection refused stays refused, for the same reason;
// and once the guards are gone the ledger holds nothing. A crash or a sanitizer report is a
// finding too.

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include <uma/actors/remote/wire/detail/frame_guard.hpp>
#include <uma/actors/remote/wire/detail/unfinished_ledger.hpp>

namespace {

using uma::detail::frame_guard;
using uma::detail::guard_reason;

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "uma_wire_fuzz (HTTP/2 frames): %s\n", what);
    std::abort();
  }
}

uma::detail::frame_limits small_limits() {
  uma::detail::frame_limits l;
  l.pings_per_second = 5;
  l.settings_per_second = 5;
  l.resets_per_second = 5;
  l.empty_frames_per_second = 20;
  l.header_block_bytes = 2048;
  l.streams_with_unfinished = 8;
  l.max_message_bytes = 4096;
  l.unfinished_per_connection = 10'000;
  l.unfinished_per_identity = 12'000;
  l.unfinished_total = 16'000;
  return l;
}

}  // namespace

void fuzz_http2_frames(const std::uint8_t* data, std::size_t size) {
  static const auto limits = small_limits();
  static const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  uma::detail::unfinished_ledger ledger(limits);
  const std::array<std::string, 3> identity{"uid 1", "uid 1", "uid 2"};
  std::array<std::unique_ptr<frame_guard>, 3> guards;
  std::array<guard_reason, 3> refused{};
  auto now = frame_guard::clock_type::time_point{} + std::chrono::hours(1);
  for (std::size_t i = 0; i < guards.size(); ++i) {
    guards[i] = std::make_unique<frame_guard>(limits, ledger, identity[i]);
    if (i < 2)  // the third starts from the fuzzer's bytes: the preface is fuzzed too
      refused[i] = guards[i]->from_peer(preface, now);
  }
  while (size >= 2) {
    const auto head = data[0];
    const std::size_t n = std::min<std::size_t>(data[1], size - 2);
    const std::string_view bytes(reinterpret_cast<const char*>(data + 2), n);
    data += 2 + n;
    size -= 2 + n;
    const auto c = static_cast<std::size_t>(head & 0x3) % guards.size();
    now += std::chrono::milliseconds(100 * ((head >> 2) & 0x1f));
    if ((head & 0x80) != 0) {
      guards[c]->from_server(bytes);
    } else {
      const auto r = guards[c]->from_peer(bytes, now);
      require(refused[c] == guard_reason::none || r == refused[c],
              "a refused connection was let on, or refused for another reason");
      refused[c] = r;
    }
    const auto held = [&](std::size_t i) { return guards[i]->unfinished(); };
    for (std::size_t i = 0; i < guards.size(); ++i)
      require(held(i) <= limits.unfinished_per_connection, "a connection holds past its bound");
    require(ledger.of("uid 1") == held(0) + held(1), "the ledger misses an identity's bytes");
    require(ledger.of("uid 2") == held(2), "the ledger misses an identity's bytes");
    require(ledger.total() == held(0) + held(1) + held(2), "the ledger's total is off");
    require(ledger.of("uid 1") <= 2 * limits.unfinished_per_identity,
            "an identity holds past twice its bound");
    require(ledger.total() <= 2 * limits.unfinished_total, "all hold past twice the bound");
  }
  for (auto& g : guards)
    g.reset();
  require(ledger.total() == 0, "guards that are gone left bytes in the ledger");
}
