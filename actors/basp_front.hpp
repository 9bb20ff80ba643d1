#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace uma {

/// What a `basp_front` lets through.
struct basp_front_config {
  /// Largest BASP payload a peer may announce. CAF 0.17 has no such limit: its BASP broker
  /// allocates whatever a header's payload_len says before the first payload byte arrives.
  std::uint32_t max_payload = 16u << 20;
  /// A connection with no bytes from its peer for this long is closed; 0: never.
  std::chrono::milliseconds idle_timeout{0};
  /// Read the BASP framing (false: the bytes are TLS records, relayed as they are; only the
  /// idle and connection limits apply, and CAF's OpenSSL module refuses peers without a valid
  /// certificate before BASP).
  bool parse_basp = true;
  /// Connections open at once; more are accepted and closed at once.
  std::size_t max_connections = 256;
  /// One line per dropped connection ("dropped 127.0.0.1:51234: ..."); may be empty. Called
  /// from the front's thread.
  std::function<void(const std::string&)> log{};
};

/// A length-checking TCP front for CAF's middleman: it listens on the public address, and for
/// each peer opens a connection to the middleman on a loopback port and relays bytes both ways.
/// It reads the BASP framing of what peers send (a 32-byte header: operation, flags,
/// payload_len, ...; then the payload) and closes the connection, before anything is forwarded
/// or allocated, when a header announces more than `max_payload` bytes, names an operation that
/// is not BASP's, is a routed message (uma peers talk directly; a routed message could claim
/// another node as its source), or when the first message is not a client handshake. Idle and
/// surplus connections are closed too. One thread; stops in the destructor.
class basp_front {
 public:
  /// Listens on `bind`:`port` (0: a free port) and relays to 127.0.0.1:`upstream_port`. Throws
  /// `error(backend_error)` naming the address when it cannot listen.
  basp_front(const std::string& bind, std::uint16_t port, std::uint16_t upstream_port,
             basp_front_config config);
  basp_front(const basp_front&) = delete;
  basp_front& operator=(const basp_front&) = delete;
  ~basp_front();

  /// The public port bound.
  [[nodiscard]] std::uint16_t port() const noexcept;
  /// Connections dropped for a protocol violation so far (not counting idle or surplus ones).
  [[nodiscard]] std::uint64_t violations() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace uma
