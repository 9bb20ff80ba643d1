#pragma once

// The sequence form of access plans (issue 15, docs/residency.md): iterative work names its
// steps once, and each step's plan is issued one step ahead, so that the next step's data moves
// while the current step runs (the allocator's lanes carry placements and evictions at once).

#include <cstddef>
#include <optional>
#include <vector>

#include <uma/actors/client.hpp>

namespace uma {

/// One step of a sequence: what an access plan names.
struct access_step {
  std::vector<byte_ref> refs{};
  int device = 0;
  access_mode mode = access_mode::read;
  residency_policy policy = residency_policy::automatic;
  stream_view stream{};
};

/// The same plans every pass. `begin(i)` makes step i's plan the one in force: issued then if it
/// was not issued ahead, the plan of the step before it ended, and step i + 1's plan issued
/// ahead when the device's budget holds both (a plan refused ahead is issued at its own step,
/// where a refusal is the caller's). Not thread-safe: one caller steps it.
class access_sequence {
 public:
  /// Refuses (invalid_argument) an empty sequence or a step with no ref, before anything is
  /// sent.
  access_sequence(client& c, std::vector<access_step> steps);
  access_sequence(const access_sequence&) = delete;
  access_sequence& operator=(const access_sequence&) = delete;
  /// Ends the plans still held (errors are logged: the allocator may be gone).
  ~access_sequence();

  /// Step `i` (taken modulo the sequence's length) is about to run. Returns what was queued
  /// now: step i's plan unless it was issued ahead, and the plan issued ahead.
  residency_result begin(std::size_t i);
  /// Ends every plan the sequence holds.
  void finish();

  [[nodiscard]] std::size_t size() const noexcept { return steps_.size(); }
  /// Plans issued ahead, and those that the budget did not hold ahead.
  [[nodiscard]] std::size_t issued_ahead() const noexcept { return ahead_; }
  [[nodiscard]] std::size_t refused_ahead() const noexcept { return refused_ahead_; }

 private:
  residency_result issue(std::size_t step);
  void end(std::size_t step);

  client& client_;
  std::vector<access_step> steps_;
  std::vector<bool> held_;
  std::optional<std::size_t> current_;
  std::size_t ahead_ = 0;
  std::size_t refused_ahead_ = 0;
};

}  // namespace uma
