#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <uma/actors/remote/remote_tls.hpp>
#include <uma/messages/remote_types.hpp>
#include <uma/sys/renamed_field.hpp>

namespace uma {

class arbiter;

/// The bounds of a wire server (docs/distributed.md "Bounds"). Every one is on by default.
struct wire_limits {
  /// One budget of bytes for every connection's buffers together (gRPC's resource quota).
  std::size_t memory_bytes = 64u << 20;
  /// Largest message received or sent (a page of regions, a snapshot).
  std::size_t max_message_bytes = 4u << 20;
  /// Concurrent calls (HTTP/2 streams) on one connection.
  std::uint32_t max_streams_per_connection = 16;
  /// Connections one identity may hold open: a uid on the Unix sockets, a certificate's name on
  /// TCP (counted when its TLS handshake ends; the next one is closed then).
  std::uint32_t max_connections_per_identity = 16;
  /// TLS handshakes one remote address may have under way (counted at accept, before a byte of
  /// TLS; past it, the address's oldest handshake that has not sent a byte is closed to make
  /// room, or the new connection when there is none). Authenticated connections count per
  /// identity instead.
  std::uint32_t max_connections_per_address = 32;
  /// TCP connections of every address together (each holds its TLS state and 32 KiB of buffers
  /// in uma's front, outside gRPC's resource quota).
  std::uint32_t max_tcp_connections = 1024;
  /// Calls of every kind (stats and regions included) in flight on the server, and per identity.
  std::uint32_t max_in_flight = 256;
  std::uint32_t max_in_flight_per_identity = 64;
  /// Rows of the region table in one reply (a larger page asked for is cut to this; the
  /// gateway's own cap has the same name, `gateway_config::max_region_page`).
  std::uint32_t max_region_page = 256;
  /// The old name of `max_region_page`, for one release (issue 38): set `max_region_page`. A
  /// value set here is used instead of it.
  renamed_field<std::uint32_t> region_page_size{};
  /// A TCP connection must finish its TLS handshake within this (uma's front). A connection
  /// handed to gRPC as a socket (Unix, or TLS after the handshake) that sends nothing is closed
  /// by the idle timeout.
  std::chrono::milliseconds handshake_timeout{5000};
  /// A connection without calls for this long is closed; sessions need their stream open, so an
  /// open session keeps its connection.
  std::chrono::milliseconds idle_timeout{300000};
  /// The server pings a connection quiet for this long and closes it when no answer comes in
  /// `keepalive_timeout`: a vanished peer's session ends.
  std::chrono::milliseconds keepalive_time{30000};
  std::chrono::milliseconds keepalive_timeout{10000};
  /// A call not answered by the gateway in this time fails (backend_error).
  std::chrono::milliseconds call_timeout{60000};
  /// What uma's front lets a connection send (every one of them reaches gRPC through the front,
  /// which reads its HTTP/2 frames): past one, the connection is closed and counted in
  /// `uma_wire_connections_closed_total{reason=...}`. Per connection and second: PING and
  /// SETTINGS frames (acknowledgements are free), RST_STREAM frames (the "rapid reset" of
  /// streams), and frames that carry nothing (PRIORITY, empty DATA or header fragments, unknown
  /// types).
  std::uint32_t max_pings_per_second = 100;
  /// New connections of one identity a second (past it, closed at accept; TCP: when the
  /// handshake ends), and for how long an identity gets none after one of its connections was
  /// closed for going past a bound per second below (so that connecting again is no way around
  /// one).
  std::uint32_t max_new_connections_per_second = 20;
  std::chrono::milliseconds bound_penalty{1000};
  std::uint32_t max_settings_per_second = 100;
  std::uint32_t max_resets_per_second = 200;
  std::uint32_t max_empty_frames_per_second = 1000;
  /// One HEADERS frame with its CONTINUATION frames.
  std::uint32_t max_header_block_bytes = 64u << 10;
  /// Bytes of gRPC messages begun and not finished, which gRPC holds in its resource quota
  /// (`memory_bytes`, shared by every connection, where running short cancels streams of any
  /// connection): of one connection (at least one largest message), of one identity's
  /// connections, and of all connections (at most a quarter of `memory_bytes`). Past the last
  /// two, a connection is closed only while it holds more than an even share (of its identity's
  /// bytes among the identity's connections; of all among the identities): the one that fills
  /// the server pays, and the most held at once is twice the bound.
  std::size_t max_unfinished_bytes_per_connection = 8u << 20;
  std::size_t max_unfinished_bytes_per_identity = 16u << 20;
  std::size_t max_unfinished_bytes = 16u << 20;
};

/// Where and how a wire server listens, and who is the operator.
struct wire_server_config {
  /// The tenants' Unix socket (created; an existing socket file there is replaced). Identity:
  /// the peer's uid (SO_PEERCRED). Empty: none.
  std::string socket_path{};
  /// The tenants' socket's permissions: 0600 (the serving user only) or 0660 (and its group).
  mode_t socket_mode = 0600;
  /// The operator's Unix socket (mode 0600): every connection there is the operator. Empty: none.
  std::string operator_socket_path{};
  /// TCP listener with mutual TLS (both files and the CA required): `tcp_bind`:`tcp_port`
  /// (0 takes a free port). Identity: the client certificate's common name.
  bool tcp = false;
  std::string tcp_bind = "127.0.0.1";
  std::uint16_t tcp_port = 0;
  tls_options tls{};
  /// Client-certificate common names that are the operator over TCP (none by default).
  std::vector<std::string> operator_names{};
  /// The gateway's operator key: the server adds it to the operator's requests; it never leaves
  /// the process.
  operator_key operator_secret{};
  wire_limits limits{};
  /// The node's arbiter (actors/remote/arbiter/arbiter.hpp), served as uma.wire.v1.Arbiter on
  /// the same listeners; null: the node has none (its calls answer UNIMPLEMENTED).
  std::shared_ptr<uma::arbiter> arbiter{};
  /// Connection refusals and listener events; may be called from gRPC's threads.
  std::function<void(const std::string&)> log{};
};

}  // namespace uma
