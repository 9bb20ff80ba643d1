#pragma once

// A process's membership of its node's arbiter (docs/distributed.md "One GPU, many processes"):
// it joins over the node's socket, receives its device budgets as the arbiter changes them, and
// applies each (a lowered one evicted before it is acknowledged, so the bytes reach another
// process only once they are off the device). The membership lasts as long as the object, or
// this process: when either ends, the node gets the bytes back at once.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <uma/actors/remote/arbiter/arbiter_types.hpp>
#include <uma/actors/remote/remote_client.hpp>

namespace uma {

class client;

/// Applies one grant to this process's memory and returns the bytes it keeps resident on the
/// grant's device afterwards. A lowered budget must be evicted down to before it returns
/// (contents kept); a revoked grant (`revoked`) leaves the process nothing on the device.
/// Called on the member's own thread, one grant at a time, in order.
using arbiter_apply = std::function<std::uint64_t(const arbiter_grant&)>;

/// The apply of a `uma::client`: the grant becomes the device's budget (client::device_budget,
/// which evicts the least recently used regions no plan holds down to it at once, contents
/// kept; 0 bytes is 1 byte), and the resident bytes are the residency report's. A revoked
/// member's quota is also set to what it holds, so its further allocations are refused
/// (quota_exceeded). `c` must outlive the member.
[[nodiscard]] arbiter_apply apply_to(client& c);

/// Thread-safe, except that the destructor must not race other calls.
class arbiter_member {
 public:
  /// Joins the arbiter of the node at `target` ("unix:PATH", or "HOST:PORT" with TLS in
  /// `options`) as `name`, with one claim per device, and applies the first grants before it
  /// returns. Throws what the arbiter refused (invalid_argument: a name, a claim, a minimum or
  /// priority above the operator's policy; quota_exceeded: the minimums do not fit),
  /// not_supported when the node has no arbiter, or backend_error naming the target when it
  /// cannot be reached.
  arbiter_member(std::string target, std::string name, std::vector<arbiter_claim> claims,
                 arbiter_apply apply, remote_client_options options = {});
  arbiter_member(const arbiter_member&) = delete;
  arbiter_member& operator=(const arbiter_member&) = delete;
  /// Leaves: the node frees this member's budgets at once.
  ~arbiter_member();

  /// This process wants `bytes` on `device` now (at least its minimum, at most the device's
  /// total), or is idle there (it lends what it holds above its minimum). The grants that follow
  /// arrive as they come. Throws the arbiter's refusal.
  void want(int device, std::uint64_t bytes, bool idle = false);
  /// The budget last applied on `device` (0 for a device not claimed).
  [[nodiscard]] std::uint64_t budget(int device) const;
  /// Waits up to `timeout` until `device`'s applied budget satisfies `pred`; returns whether it
  /// did.
  bool wait_for_budget(int device, const std::function<bool(std::uint64_t)>& pred,
                       std::chrono::milliseconds timeout) const;
  /// The member's id at the node.
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  /// True once the arbiter revoked every grant (this member did not evict in time).
  [[nodiscard]] bool revoked() const;
  /// Why the membership ended, when it did (the node went down, or revoked it); empty while it
  /// lasts.
  [[nodiscard]] std::string ended() const;
  /// The arbiter's report, as this identity may see it (its own members; every device's totals).
  [[nodiscard]] arbiter_report report() const;

 private:
  struct impl;
  void read_grants();
  void apply_one(const arbiter_grant& g);
  /// Tells the arbiter that shrink `g` is evicted and `resident` bytes stay (before the new
  /// budget is published: a caller that sees it may leave at once).
  void acknowledge(const arbiter_grant& g, std::uint64_t resident);

  std::string target_;
  std::chrono::milliseconds timeout_;
  arbiter_apply apply_;
  std::unique_ptr<impl> impl_;
  std::uint64_t id_ = 0;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::map<int, std::uint64_t> budgets_;
  bool revoked_ = false;
  std::string ended_;
  std::thread reader_;
};

}  // namespace uma
