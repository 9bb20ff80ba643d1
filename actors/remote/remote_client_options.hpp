#pragma once

// How a client of a serving node connects (remote_client, arbiter_member, arbiter_client).

#include <chrono>
#include <string>

#include <uma/actors/remote/remote_tls.hpp>

namespace uma {

/// How a client of a serving node (`remote_client`, `arbiter_member`, `arbiter_client`) connects.
struct remote_client_options {
  /// How long connecting, and then each call, may take.
  std::chrono::milliseconds timeout = std::chrono::seconds(30);
  /// This client's certificate, key and the CA the server's certificate must chain to: required
  /// for a TCP target (the server speaks mutual TLS only), unused on a Unix socket.
  tls_options tls{};
  /// The name the server's certificate must carry; empty: the target's host.
  std::string tls_server_name{};
};

}  // namespace uma
