#pragma once

// The serving node's arbiter (docs/distributed.md "One GPU, many processes"): it owns each
// device's shareable bytes and divides them live among the processes that joined it over the
// node's sockets. Thread-safe; `uma serve --arbiter-total` makes one and hands it to the wire
// server (wire_server_config::arbiter), which serves it as uma.wire.v1.Arbiter.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <uma/actors/remote/arbiter/arbiter_types.hpp>

namespace uma {

namespace detail {
class arbiter_book;
}

/// How an arbiter is set up.
struct arbiter_config {
  /// Each device's bytes shared among the members (below the card's memory: the rest is the
  /// node's own and the driver's).
  std::map<int, std::uint64_t> totals{};
  /// How long a member has to evict down to a lowered budget before it loses every grant.
  std::chrono::milliseconds evict_deadline{10'000};
  /// The operator's policies at start: (tenant, device, policy); `uma budgets` changes them live.
  std::vector<std::tuple<std::string, int, arbiter_policy>> policies{};
  /// Members one identity may have at once (a join past it: quota_exceeded).
  std::uint32_t max_members_per_identity = 64;
  /// Each decision as a line (uma serve: stderr); may be called with the arbiter's lock held.
  std::function<void(const std::string&)> log{};
};

/// Where a member's grants go: its Join stream. Called with the arbiter's lock held: it must
/// only queue.
class arbiter_sink {
 public:
  virtual ~arbiter_sink() = default;
  virtual void send(const arbiter_grant& g) = 0;
};

class arbiter {
 public:
  /// Throws invalid_argument naming the device or policy that is wrong (nothing starts).
  explicit arbiter(arbiter_config config);
  arbiter(const arbiter&) = delete;
  arbiter& operator=(const arbiter&) = delete;
  /// Stops the deadline thread; members still joined are forgotten.
  ~arbiter();

  /// A process of `identity` joins as `name` (arbiter_book::join's refusals). Its grants go to
  /// `sink` from now on, the first for each device at once. Returns the member id.
  std::uint64_t join(const std::string& identity, const std::string& name,
                     std::vector<arbiter_claim> claims, std::shared_ptr<arbiter_sink> sink);
  /// The member's connection ended: its bytes are free at once.
  void leave(std::uint64_t member, const std::string& why);
  void demand(std::uint64_t member, const std::string& identity, int device, std::uint64_t wanted,
              bool idle);
  void evicted(std::uint64_t member, const std::string& identity, int device,
               std::uint64_t sequence, std::uint64_t resident);
  /// The operator's.
  void set_policy(const std::string& tenant, int device, arbiter_policy policy);
  void set_total(int device, std::uint64_t bytes);
  /// `identity` empty: everything (the operator's view); else that identity's members only.
  [[nodiscard]] arbiter_report report(const std::string& identity = {}) const;
  /// `uma_arbiter_*` families: per device and per member (tenant label) its total, held,
  /// granted and resident bytes, shrinks, revocations.
  [[nodiscard]] std::string prometheus_text() const;

 private:
  void dispatch();  // lock held
  void watch_deadlines();

  arbiter_config config_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::unique_ptr<detail::arbiter_book> book_;
  struct joined {
    std::string identity;
    std::shared_ptr<arbiter_sink> sink;
  };
  std::map<std::uint64_t, joined> sinks_;
  bool stopping_ = false;
  std::thread deadlines_;
};

}  // namespace uma
