// The HTTP/2 frame guard of the wire's front (actors/remote/wire/detail/frame_guard.hpp): what it
// lets a peer send, and the unfinished message bytes it counts per connection and identity (issue
// 35, findings 1 and 2). The floods through real sockets are in remote_process_test.cpp.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

#include <uma/actors/remote/wire/detail/frame_guard.hpp>
#include <uma/actors/remote/wire/detail/unfinished_ledger.hpp>

namespace {

using uma::detail::frame_guard;
using uma::detail::frame_limits;
using uma::detail::guard_reason;
using uma::detail::unfinished_ledger;
using namespace std::chrono_literals;

constexpr std::uint8_t data = 0, headers = 1, priority = 2, rst_stream = 3, settings = 4, ping = 6,
                       continuation = 9;
constexpr std::uint8_t end_stream = 0x1, ack = 0x1, end_headers = 0x4, padded = 0x8;

std::string frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
                  const std::string& payload = {}) {
  const auto n = payload.size();
  std::string f{static_cast<char>(n >> 16),
                static_cast<char>(n >> 8),
                static_cast<char>(n),
                static_cast<char>(type),
                static_cast<char>(flags),
                static_cast<char>(stream >> 24),
                static_cast<char>(stream >> 16),
                static_cast<char>(stream >> 8),
                static_cast<char>(stream)};
  return f + payload;
}

/// The 5-byte prefix of a gRPC message of `length` bytes.
std::string message_prefix(std::uint32_t length) {
  return {'\0', static_cast<char>(length >> 24), static_cast<char>(length >> 16),
          static_cast<char>(length >> 8), static_cast<char>(length)};
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i)
    out += s;
  return out;
}

const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

frame_limits small_limits() {
  frame_limits l;
  l.max_message_bytes = 4096;
  l.unfinished_per_connection = 10'000;
  l.unfinished_per_identity = 12'000;
  l.unfinished_total = 16'000;
  return l;
}

class frame_guards : public ::testing::Test {
 protected:
  frame_limits limits_ = small_limits();
  unfinished_ledger ledger_{limits_};
  frame_guard::clock_type::time_point t0_ = frame_guard::clock_type::now();

  /// A guard of `identity` that has read the preface and the peer's first SETTINGS.
  std::unique_ptr<frame_guard> open(const std::string& identity = "uid 1") {
    auto g = std::make_unique<frame_guard>(limits_, ledger_, identity);
    EXPECT_EQ(g->from_peer(preface + frame(settings, 0, 0), t0_), guard_reason::none);
    return g;
  }
};

TEST_F(frame_guards, ThePeersFirstBytesMustBeHttp2sPrefaceEvenInPieces) {
  frame_guard bad(limits_, ledger_, "uid 1");
  EXPECT_EQ(bad.from_peer("GET / HTTP/1.1\r\n", t0_), guard_reason::not_http2);
  EXPECT_EQ(bad.from_peer(preface, t0_), guard_reason::not_http2);  // closed stays closed
  frame_guard good(limits_, ledger_, "uid 1");
  EXPECT_EQ(good.from_peer(preface.substr(0, 5), t0_), guard_reason::none);
  EXPECT_EQ(good.from_peer(preface.substr(5) + frame(settings, 0, 0), t0_), guard_reason::none);
}

TEST_F(frame_guards, PingsPastTheBoundWithinOneSecondCloseButAcknowledgementsAreFree) {
  auto g = open();
  const auto one = frame(ping, 0, 0, std::string(8, 'p'));
  EXPECT_EQ(g->from_peer(repeat(frame(ping, ack, 0, std::string(8, 'a')), 5000), t0_),
            guard_reason::none);
  EXPECT_EQ(g->from_peer(repeat(one, 100), t0_), guard_reason::none);
  EXPECT_EQ(g->from_peer(one, t0_ + 999ms), guard_reason::pings);
}

TEST_F(frame_guards, PingsSpreadOverSecondsStayWithinTheBound) {
  auto g = open();
  const auto hundred = repeat(frame(ping, 0, 0, std::string(8, 'p')), 100);
  for (int s = 0; s < 5; ++s)
    EXPECT_EQ(g->from_peer(hundred, t0_ + std::chrono::seconds(s)), guard_reason::none) << s;
}

TEST_F(frame_guards, RapidResetClosesAtTheResetBound) {
  auto g = open();
  std::string flood;
  for (std::uint32_t s = 1; s < 2 * 200; s += 2)
    flood += frame(headers, end_headers, s, "h") + frame(rst_stream, 0, s, std::string(4, '\0'));
  EXPECT_EQ(g->from_peer(flood, t0_), guard_reason::none);  // 200 resets
  EXPECT_EQ(g->from_peer(frame(headers, end_headers, 401, "h") +
                             frame(rst_stream, 0, 401, std::string(4, '\0')),
                         t0_),
            guard_reason::resets);
}

TEST_F(frame_guards, SettingsFloodsAndFramesThatCarryNothingClose) {
  auto s = open();
  EXPECT_EQ(s->from_peer(repeat(frame(settings, ack, 0), 1000), t0_), guard_reason::none);
  EXPECT_EQ(s->from_peer(repeat(frame(settings, 0, 0), 100), t0_), guard_reason::settings);
  auto p = open();
  EXPECT_EQ(p->from_peer(repeat(frame(priority, 0, 1, std::string(5, '\0')), 1001), t0_),
            guard_reason::empty_frames);
  auto d = open();
  EXPECT_EQ(d->from_peer(repeat(frame(data, 0, 1), 1001), t0_), guard_reason::empty_frames);
  auto u = open();
  EXPECT_EQ(u->from_peer(repeat(frame(0x42, 0, 0, "x"), 1001), t0_), guard_reason::empty_frames);
}

TEST_F(frame_guards, AHeaderBlockPastTheBoundClosesWhateverTheFramesItIsCutInto) {
  auto g = open();
  const std::string piece(16'000, 'h');
  EXPECT_EQ(
      g->from_peer(frame(headers, 0, 1, piece) + repeat(frame(continuation, 0, 1, piece), 3), t0_),
      guard_reason::none);  // 64,000 bytes
  EXPECT_EQ(g->from_peer(frame(continuation, end_headers, 1, std::string(1537, 'h')), t0_),
            guard_reason::header_block);
  auto ok = open();  // blocks that end in time each start again from 0
  for (std::uint32_t s = 1; s < 40; s += 2)
    EXPECT_EQ(ok->from_peer(
                  frame(headers, 0, s, piece) + frame(continuation, end_headers, s, piece), t0_),
              guard_reason::none);
}

TEST_F(frame_guards, AMessageCountsUntilItsLastByteArrivesEvenAcrossFrames) {
  auto g = open();
  const auto body = std::string(1000, 'm');
  ASSERT_EQ(g->from_peer(frame(data, 0, 1, message_prefix(1000) + body.substr(0, 300)), t0_),
            guard_reason::none);
  EXPECT_EQ(g->unfinished(), 305u);
  EXPECT_EQ(ledger_.of("uid 1"), 305u);
  ASSERT_EQ(g->from_peer(frame(data, 0, 1, body.substr(300, 699)), t0_), guard_reason::none);
  EXPECT_EQ(g->unfinished(), 1004u);
  // The last byte, then a whole second message and the first 2 bytes of a third's prefix.
  ASSERT_EQ(g->from_peer(frame(data, 0, 1,
                               std::string(1, 'm') + message_prefix(10) + std::string(10, 'n') +
                                   std::string(2, '\0')),
                         t0_),
            guard_reason::none);
  EXPECT_EQ(g->unfinished(), 2u);
  EXPECT_EQ(ledger_.total(), 2u);
}

TEST_F(frame_guards, PaddingIsNotCountedAsMessageBytes) {
  auto g = open();
  const std::string pad(50, '\0');
  ASSERT_EQ(
      g->from_peer(frame(data, padded, 1, std::string(1, '\x32') + message_prefix(100) + pad), t0_),
      guard_reason::none);
  EXPECT_EQ(g->unfinished(), 5u);
}

TEST_F(frame_guards, AConnectionPastItsBoundCloses) {
  auto g = open();
  std::string two;
  for (std::uint32_t s = 1; s <= 5; s += 2)  // 3 streams of 4,000 unfinished bytes: 12,000
    two += frame(data, 0, s, message_prefix(4096) + std::string(3995, 'x'));
  EXPECT_EQ(g->from_peer(two, t0_), guard_reason::unfinished);
  EXPECT_LE(g->unfinished(), limits_.unfinished_per_connection);
}

TEST_F(frame_guards, AMessageDeclaredPastTheLargestCountsAsTheLargest) {
  auto g = open();
  ASSERT_EQ(
      g->from_peer(frame(data, 0, 1, message_prefix(0xffffffffu) + std::string(4091, 'x')), t0_),
      guard_reason::none);
  EXPECT_EQ(g->unfinished(), 4096u);
  ASSERT_EQ(g->from_peer(frame(data, 0, 1, std::string(5000, 'x')), t0_), guard_reason::none);
  EXPECT_EQ(g->unfinished(), 4096u + 5);
}

TEST_F(frame_guards, StreamsEndedByEitherSideGiveTheirBytesBack) {
  auto g = open();
  const auto half = message_prefix(4000) + std::string(2000, 'x');
  ASSERT_EQ(g->from_peer(
                frame(data, 0, 1, half) + frame(data, 0, 3, half) + frame(data, 0, 5, half), t0_),
            guard_reason::none);
  EXPECT_EQ(g->unfinished(), 3 * 2005u);
  // The peer cancels stream 1; gRPC ends stream 3 (RST_STREAM) and 5 (trailers).
  ASSERT_EQ(g->from_peer(frame(rst_stream, 0, 1, std::string(4, '\0')), t0_), guard_reason::none);
  g->from_server(frame(rst_stream, 0, 3, std::string(4, '\0')));
  EXPECT_EQ(g->unfinished(), 2005u);
  g->from_server(frame(headers, end_stream | end_headers, 5, "t"));
  EXPECT_EQ(g->unfinished(), 0u);
  // DATA the peer sent before it learnt that gRPC ended stream 3 opens no new message.
  ASSERT_EQ(g->from_peer(frame(data, 0, 3, std::string(3000, 'x')), t0_), guard_reason::none);
  EXPECT_EQ(g->unfinished(), 0u);
  EXPECT_EQ(ledger_.total(), 0u);
}

TEST_F(frame_guards, WithinAnIdentityTheConnectionHoldingMostIsClosedAndTheOtherGoesOn) {
  auto greedy = open("uid 7");
  auto honest = open("uid 7");
  const auto chunk = [](std::uint32_t s) {
    return frame(data, 0, s, message_prefix(4096) + std::string(3995, 'x'));
  };
  ASSERT_EQ(greedy->from_peer(chunk(1) + chunk(3), t0_), guard_reason::none);  // 8,000
  ASSERT_EQ(honest->from_peer(chunk(1), t0_), guard_reason::none);             // 12,000 in all
  // Past the identity's 12,000: the greedy one holds more than half of it and is refused; the
  // honest one holds less and goes on.
  EXPECT_EQ(greedy->from_peer(frame(data, 0, 5, std::string(2, '\0')), t0_),
            guard_reason::identity_share);
  EXPECT_EQ(honest->from_peer(frame(data, 0, 3, message_prefix(10) + "12345"), t0_),
            guard_reason::none);
  greedy.reset();
  EXPECT_EQ(ledger_.of("uid 7"), honest->unfinished());
}

TEST_F(frame_guards, PastTheTotalOnlyAnIdentityAboveAnEvenShareIsRefused) {
  auto big = open("uid 1");
  auto big2 = open("uid 1");
  auto small = open("uid 2");
  const auto chunk = [](std::uint32_t s) {
    return frame(data, 0, s, message_prefix(4096) + std::string(3995, 'x'));
  };
  ASSERT_EQ(big->from_peer(chunk(1) + chunk(3), t0_), guard_reason::none);
  ASSERT_EQ(big2->from_peer(chunk(1), t0_), guard_reason::none);   // uid 1: 12,000
  ASSERT_EQ(small->from_peer(chunk(1), t0_), guard_reason::none);  // 16,000: the total
  EXPECT_EQ(small->from_peer(frame(data, 0, 3, std::string(2, '\0')), t0_), guard_reason::none);
  EXPECT_EQ(big2->from_peer(frame(data, 0, 3, std::string(2, '\0')), t0_),
            guard_reason::identity_share);
}

TEST_F(frame_guards, ADestroyedGuardGivesAllItHeldBack) {
  {
    auto g = open("uid 3");
    ASSERT_EQ(g->from_peer(frame(data, 0, 1, message_prefix(4000) + std::string(3000, 'x')), t0_),
              guard_reason::none);
    EXPECT_EQ(ledger_.total(), 3005u);
  }
  EXPECT_EQ(ledger_.total(), 0u);
  EXPECT_EQ(ledger_.of("uid 3"), 0u);
}

}  // namespace
