#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>

#include <uma/messages/interface.hpp>

namespace uma {

/// Where and within which bounds a `metrics_endpoint` serves.
struct metrics_endpoint_config {
  /// The address to listen on. Loopback unless you say otherwise: the endpoint authenticates
  /// nobody, and the metrics name labels and sizes of what an application holds.
  std::string address = "127.0.0.1";
  std::uint16_t port = 0;   ///< 0 takes a free port (`metrics_endpoint::port()` says which)
  std::size_t threads = 1;  ///< io_context threads of the endpoint's own
  std::size_t max_connections = 32;                ///< more are answered 503 and closed at once
  std::size_t max_request_bytes = 8192;            ///< request line, header and body; more: 413
  std::chrono::milliseconds read_timeout{10'000};  ///< an idle connection is closed after this
  std::chrono::milliseconds ask_timeout{2'000};    ///< how long a scrape waits for the allocator
  /// Add `uma_label_live_regions` / `uma_label_live_bytes` (the region table, summed by label,
  /// at most 100 labels: the rest as "(other)"). Off by default: a region report costs the
  /// allocator's loop a walk of its table (with 10,000 live regions it triples a scrape's p99,
  /// docs/performance.md, "Scraping"), so one is made at most once per `labels_interval`, whose
  /// scrapes show the labels read last. The labels name what every tenant holds: whoever reaches
  /// the endpoint reads them (set `bearer_token`).
  bool labels = false;
  std::chrono::milliseconds labels_interval{5'000};
  /// Non-empty: every request must carry `Authorization: Bearer <token>` (Prometheus:
  /// `authorization: {credentials_file: ...}`); any other is answered 401 before it is routed.
  std::string bearer_token{};
  /// Renders the allocator's snapshot (`snapshot_atom`) as the body of `GET /snapshot`
  /// (application/json; 503 "the allocator is stopped" once it stopped). Unset, the default,
  /// there is no such route (404). The library has no JSON writer of its own: the uma tool's is
  /// `uma::cli::to_json` (tools/snapshot_json.hpp, on Boost.JSON).
  std::function<std::string(const allocator_snapshot&)> snapshot_json{};
  /// More metric families, in Prometheus text, appended to every `GET /metrics` (`uma serve`:
  /// its wire server's, `wire_server::prometheus_text`). Called on the endpoint's threads.
  std::function<std::string()> extra_families{};
};

/// An HTTP endpoint (Boost.Beast over Boost.Asio, on threads of its own) that a Prometheus
/// server scrapes: `GET /metrics` answers the allocator's counters in the text exposition
/// format (`uma::to_prometheus`, the families of docs/cli.md), `GET /healthz` answers 200 "ok"
/// while the allocator answers and 503 with the reason when it does not (stopped, restarting,
/// unreachable); with `snapshot_json` configured, `GET /snapshot` answers the allocator's
/// snapshot as JSON. Anything else: 404; a method other than GET: 405 with `Allow: GET`; a request
/// past `max_request_bytes`: 413; a malformed one: 400.
///
/// Every scrape asks the allocator by message (`stats_atom`, `regions_atom` for the labels,
/// `supervision_atom` when serving a supervisor) from a short-lived actor of its own: no actor
/// ever blocks on the endpoint, and a slow allocator delays only its scrape.
///
/// Destroy the endpoint before the actor system: the destructor stops serving, closes every
/// connection and joins the endpoint's threads; replies still in flight are dropped.
class metrics_endpoint {
 public:
  /// Serves the metrics of a bare allocator. Throws `uma::error`: invalid_argument for a
  /// malformed address or a null handle, backend_error when the port cannot be bound (naming
  /// address, port and why).
  metrics_endpoint(caf::actor_system& sys, managed_allocator_actor allocator,
                   metrics_endpoint_config config = {});

  /// Serves the metrics of a supervised allocator, with the supervisor's counters
  /// (`uma_supervisor_*`) and its state in /healthz. Throws as the other constructor.
  metrics_endpoint(caf::actor_system& sys, allocator_supervisor_actor supervisor,
                   metrics_endpoint_config config = {});

  metrics_endpoint(const metrics_endpoint&) = delete;
  metrics_endpoint& operator=(const metrics_endpoint&) = delete;
  ~metrics_endpoint();

  /// The port it listens on (the one taken when the config said 0).
  [[nodiscard]] std::uint16_t port() const noexcept;

  /// The address it listens on, as configured.
  [[nodiscard]] const std::string& address() const noexcept;

 private:
  struct state;  // Beast and Asio stay out of this header
  std::unique_ptr<state> state_;
};

}  // namespace uma
