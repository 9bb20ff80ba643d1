#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <uma/actors/remote/remote_client_options.hpp>
#include <uma/actors/remote/remote_tls.hpp>
#include <uma/messages/remote_types.hpp>
#include <uma/sys/error.hpp>

namespace uma {

/// A blocking client of a serving node (`uma serve`) over its gRPC wire
/// (actors/remote/wire/remote.proto, docs/distributed.md), for tools, tests and plain threads. The
/// server knows the client by its connection: the uid of a process on the Unix socket, the
/// client certificate over TCP; the operator connects through the operator socket (or with a
/// certificate the server names as the operator's).
///
/// Construction connects and opens a session: a stream the server keeps open as long as the
/// session lives. Regions allocated through the client are leases of that session; they end with
/// `release`, with the client (its destructor closes the session), or when this process dies or
/// its connection drops (the server sees the stream end).
///
/// Each call waits at most the timeout for its reply. A uma error the server replies is thrown as
/// `uma::error` with the same code and message. When the serving node goes down, every call in
/// flight and every later one throws `error(allocator_stopped)` naming the server; a server that
/// does not answer in time gives `error(timeout)`. The calls are safe
/// to use from several threads at once; `close`, `set_timeout` and the destructor must not race
/// with them.
class remote_client {
 public:
  /// Connects to `target` ("unix:/run/uma/uma.sock", or "host:port" / "[::1]:port" over mutual
  /// TLS) and opens a session, each step bounded by the timeout. Throws `error(backend_error)`
  /// naming the address when nothing answers there or the session cannot open, and
  /// `error(invalid_argument)` for a TCP target without TLS files (or with unusable ones).
  explicit remote_client(std::string target, remote_client_options options = {});
  remote_client(const remote_client&) = delete;
  remote_client& operator=(const remote_client&) = delete;
  /// Closes the session (its leases are released) unless the server is gone; waits at most the
  /// timeout for the server to confirm.
  ~remote_client();

  /// "unix:/run/uma/uma.sock", "127.0.0.1:4242".
  [[nodiscard]] const std::string& address() const noexcept { return address_; }
  /// The session id the server gave this client.
  [[nodiscard]] std::uint64_t session() const noexcept { return session_.id; }
  /// The session's key (id and secret): requests about the session carry it.
  [[nodiscard]] const session_key& key() const noexcept { return session_; }
  /// How long each call waits for its reply (the constructor's timeout by default).
  void set_timeout(std::chrono::milliseconds timeout) noexcept { timeout_ = timeout; }

  /// Allocates `bytes` on the serving node, leased by this session.
  [[nodiscard]] region_handle allocate(std::uint64_t bytes, std::string label = {},
                                       std::uint64_t alignment = 0,
                                       attach_flag attach = attach_flag::global);
  /// Ends the lease of `region`; returns the bytes it gave back (0 for a stale lease).
  std::uint64_t release(region_handle region);
  /// Prefetches `regions` to one location (broadcast) or one per region.
  remote_op_result prefetch(std::vector<region_handle> regions, std::vector<location> locations,
                            completion when = completion::enqueued);
  /// Discards the contents of `regions`.
  remote_op_result discard(std::vector<region_handle> regions,
                           completion when = completion::enqueued);
  /// Applies advice to `regions`.
  remote_op_result advise(std::vector<region_handle> regions, advice what,
                          location where = location::host());
  /// An access plan on leased regions (docs/residency.md "Tenants"): placed on the plan's
  /// device and held until done_with; they count for this session's tenant (its identity).
  residency_result will_access(remote_access_plan plan);
  /// The plans on `regions` are over. Returns the holds ended.
  std::uint64_t done_with(std::vector<region_handle> regions);
  /// The contents of `regions` are not needed: discarded, nothing moves back.
  residency_result dead(std::vector<region_handle> regions);
  /// Advice and last prefetch location of a leased region, as the serving node reads them.
  [[nodiscard]] range_attributes attributes(region_handle region);
  /// The serving node's allocator, supervisor and gateway counters.
  [[nodiscard]] remote_stats stats();
  /// The regions this session leases; the operator's connection gets every region of the
  /// serving node. Read page by page (the server bounds each page).
  [[nodiscard]] std::vector<remote_region_info> regions();
  /// One page of `regions()`: at most `page_size` rows (0: the server's page size) from
  /// `start`; `total` is set to the table's size when read, `next` to the next page's start (0
  /// after the last).
  [[nodiscard]] std::vector<remote_region_info> regions_page(std::uint64_t start,
                                                             std::uint32_t page_size,
                                                             std::uint64_t& total,
                                                             std::uint64_t& next);
  /// The serving node's snapshot: every region (with the session leasing it), the counters and
  /// the event history; the operator's only. Throws `error(invalid_argument)` for a tenant,
  /// `error(allocator_stopped)` when the serving node's allocator stopped, and
  /// `error(backend_error)` when the server's reply has a value out of range.
  [[nodiscard]] remote_snapshot snapshot();
  /// The quota in force.
  [[nodiscard]] std::uint64_t quota();
  /// Sets the quota (the operator only; never above the node's ceiling); returns it.
  std::uint64_t set_quota(std::uint64_t bytes);
  /// The supervisor's explicit restart of the serving node's allocator (the operator only):
  /// every session's leases end with the old generation. Returns the new generation; throws
  /// `error(invalid_argument)` for a tenant.
  std::uint64_t restart();
  /// Always throws `error(not_supported)`: managed memory is never exported over CUDA IPC, and
  /// the wire has no such call.
  void export_ipc(region_handle region);

  /// Closes the session now (its leases are released); later calls fail with
  /// `error(invalid_argument)` naming the closed session, without a message. Idempotent.
  void close();

 private:
  struct impl;
  void check_open() const;

  std::string address_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<impl> impl_;
  session_key session_{};
  bool closed_ = false;
};

}  // namespace uma
