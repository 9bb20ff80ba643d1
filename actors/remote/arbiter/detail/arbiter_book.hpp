#pragma once

// The arbiter's book (docs/distributed.md "One GPU, many processes"): the processes that joined,
// what each asked for and was granted per device, the shrinks not yet acknowledged and their
// deadlines, the operator's policies and the ledger of decisions. Plain data driven by its
// callers with the time (no clock of its own, no thread, no lock): the arbiter service
// (arbiter.hpp) holds it under its mutex.
//
// The invariant it keeps: on every device, the members' held bytes together never exceed the
// device's total. A member's held bytes are its grant, or more while it has not acknowledged a
// shrink: bytes taken from one member reach another only once the first said it evicted them
// (or its deadline passed and it lost every grant).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <uma/actors/remote/arbiter/arbiter_types.hpp>

namespace uma::detail {

/// How the book is set up: each device's shareable bytes, how long a member has to evict.
struct arbiter_settings {
  std::map<int, std::uint64_t> totals;  // device -> bytes shared among the members
  std::chrono::milliseconds evict_deadline{10'000};
  std::size_t ledger_length = 1024;  // decisions kept (the oldest go first)
};

class arbiter_book {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  /// Throws invalid_argument naming the device for a device < 0 or a total of 0, and for a
  /// deadline of 0.
  arbiter_book(arbiter_settings settings, time_point now);

  /// A process of `identity` (from its connection: "uid 1000", "cert NAME") joins as `name`
  /// with one claim per device. Returns its member id. Throws (nothing changed)
  /// invalid_argument naming what was wrong: an empty or overlong name or one with control
  /// characters, no claims, a device named twice or not divided here, wanted bytes above the
  /// device's total or below the minimum, a weight outside 1..1000, a minimum, priority or
  /// weight above the tenant's policy ("... is the operator's"); quota_exceeded when the
  /// minimums together would pass a device's total. The grants it makes are in take_grants().
  std::uint64_t join(const std::string& identity, const std::string& name,
                     std::vector<arbiter_claim> claims, time_point now);
  /// Member `member` of `identity` wants `wanted` bytes on `device` now, or is idle. Throws
  /// invalid_argument for a member that is not `identity`'s (or not a member), a revoked one,
  /// a device it did not claim, or wanted bytes outside [min, total].
  void demand(std::uint64_t member, const std::string& identity, int device, std::uint64_t wanted,
              bool idle, time_point now);
  /// Member `member` evicted for grant `sequence` on `device` and holds `resident` bytes there
  /// now. Same refusals as demand, and for a sequence it was never sent.
  void evicted(std::uint64_t member, const std::string& identity, int device,
               std::uint64_t sequence, std::uint64_t resident, time_point now);
  /// Member `member` is gone (its connection ended): its bytes are free at once.
  void leave(std::uint64_t member, const std::string& why, time_point now);
  /// The operator's policy for tenant `tenant` ("<identity>/<name>") on `device`: the most a
  /// member of it may ask at join. Members there now take its priority and weight (the
  /// operator's word is final) and have their minimums capped to it, at once.
  void set_policy(const std::string& tenant, int device, arbiter_policy policy, time_point now);
  /// The operator changes a device's total. Refused (quota_exceeded, nothing changed) below the
  /// members' minimums together; a lower total shrinks members as any decision does.
  void set_total(int device, std::uint64_t bytes, time_point now);
  /// Members whose shrink passed its deadline lose every grant (revoked); returns how many.
  std::size_t expire(time_point now);
  /// When the next deadline passes, if a shrink is waiting.
  [[nodiscard]] std::optional<time_point> next_deadline() const;

  /// The grants decided since the last call, in order, for the service to send.
  [[nodiscard]] std::vector<arbiter_grant> take_grants();
  /// Every device with its members, and the ledger. `identity` empty: all members (the
  /// operator); else only that identity's members are listed (totals are for everyone).
  /// Without `with_ledger`, no decisions (the metrics need only the state).
  [[nodiscard]] arbiter_report report(const std::string& identity, bool with_ledger = true) const;
  [[nodiscard]] bool is_member(std::uint64_t member) const { return members_.count(member) != 0; }

 private:
  struct share {
    arbiter_claim claim;
    std::uint64_t granted = 0;
    std::uint64_t held = 0;
    std::uint64_t resident = 0;
    std::uint64_t shrink_sequence = 0;  // 0: no shrink waiting for its acknowledgement
    time_point shrink_sent{};
    time_point deadline{};
    std::uint64_t grown = 0, shrunk = 0, shrinks = 0;
    std::chrono::milliseconds slowest{0};
  };
  struct member {
    std::string identity;
    std::string tenant;  // identity + "/" + name
    std::map<int, share> shares;
    std::uint64_t sequence = 0;
    bool revoked = false;
  };

  /// The member of `identity`, or invalid_argument naming `what`.
  member& owned(std::uint64_t id, const std::string& identity, const char* what);
  /// The claim capped by (and checked against) the tenant's policy.
  void check_claim(const std::string& tenant, const arbiter_claim& c) const;
  /// Recomputes every device's division and sends what changed: shrinks at once, growth as far
  /// as the held bytes leave room (the rest when shrinks are acknowledged).
  void rebalance(const std::string& why, time_point now);
  void rebalance_device(int device, const std::string& why, time_point now);
  /// Grows the members `who` of `device` that are below their `targets`, the highest priority
  /// first, out of the bytes no member holds (the rest when shrinks are acknowledged).
  void grow(int device, const std::vector<std::pair<std::uint64_t, member*>>& who,
            const std::vector<std::uint64_t>& targets, const std::string& why, time_point now);
  void grant(std::uint64_t id, member& m, int device, std::uint64_t bytes, const std::string& why,
             time_point now);
  void revoke(std::uint64_t id, member& m, const std::string& why, time_point now);
  void note(std::uint64_t id, const member& m, int device, std::uint64_t from, std::uint64_t to,
            const std::string& why, time_point now);

  arbiter_settings settings_;
  time_point start_;
  std::map<std::uint64_t, member> members_;
  std::map<std::pair<std::string, int>, arbiter_policy> policies_;
  std::deque<arbiter_decision> ledger_;
  std::vector<arbiter_grant> outbox_;
  std::uint64_t next_member_ = 1;
  std::uint64_t revocations_ = 0;
};

}  // namespace uma::detail
