#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>

#include <uma/actors/remote/wire/wire_config.hpp>
#include <uma/messages/remote_interface.hpp>

namespace uma {

/// The remote interface served over gRPC (actors/remote/wire/remote.proto) in front of a gateway
/// (actors/remote/remote_gateway.hpp): identity from the connection, bounds of gRPC's own (resource
/// quota, message size, streams, keepalive, idle) and the server's (connections per identity and
/// per address, the TLS handshake deadline, calls in flight, region pages). Handlers never block a
/// CAF worker and never park a thread per call: each call is a CAF request whose reply finishes the
/// gRPC call.
class wire_server {
 public:
  /// Validates the configuration (TLS files read, parsed and matched here, and again only by
  /// `reload_tls`), binds every listener and starts serving. Throws `error(invalid_argument)`
  /// naming the option or file, `error(backend_error)` naming the address when a listener cannot
  /// bind.
  wire_server(caf::actor_system& sys, remote_allocator_actor gateway, wire_server_config config);
  wire_server(const wire_server&) = delete;
  wire_server& operator=(const wire_server&) = delete;
  /// Ends every session stream and stops listening (bounded), removing the socket files.
  ~wire_server();

  /// Reads the TLS files of the configuration again and checks them as at start; when they pass,
  /// TLS handshakes from now on use them (connections already open keep theirs). Throws
  /// `error(invalid_argument)` naming the file and what is wrong, with nothing changed, and the
  /// same when the server has no TCP listener.
  void reload_tls();
  /// The TCP port bound (0 without TCP).
  [[nodiscard]] std::uint16_t tcp_port() const noexcept;
  /// Calls refused because a bound was reached, since start (every kind).
  [[nodiscard]] std::uint64_t refused_calls() const noexcept;
  /// Connections refused since start: past a cap per identity (uid or certificate) or per
  /// address, or a certificate without a name.
  [[nodiscard]] std::uint64_t refused_connections() const noexcept;
  /// Connections closed since start because they went past a bound on what a connection sends
  /// (`wire_limits`, from `max_pings_per_second` on), by the bound's name ("pings", "settings",
  /// "resets", "empty_frames", "header_block", "streams", "unfinished", "identity_share",
  /// "not_http2"); every name is there, with 0 when none was closed.
  [[nodiscard]] std::vector<std::pair<std::string, std::uint64_t>> closed_connections() const;
  /// The Prometheus text of the wire's counters (`refused_calls`, `refused_connections`,
  /// `closed_connections`), for `metrics_endpoint_config::extra_families`.
  [[nodiscard]] std::string prometheus_text() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace uma
