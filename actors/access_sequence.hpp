#pragma once

// The sequence form of access plans (issue 15, docs/residency.md): iterative work names its
// steps once, and each step's plan is issued one step ahead, so that the next step's data moves
// while the current step runs (the allocator's lanes carry placements and evictions at once).

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include <uma/actors/client.hpp>

namespace uma {

/// One step of a sequence: what an access plan names.
struct access_step {
  std::vector<byte_ref> refs{};
  int device = 0;
  access_mode mode = access_mode::read;
  residency_policy policy = residency_policy::automatic;
  stream_view stream{};  ///< the moves' stream (none: the allocator's lanes' own streams)
  /// begin(i) returns once step i's placements are done (`complete`, for kernels on another
  /// stream) or issued (`enqueued`, enough when `stream` is the one the kernels run on).
  completion reply_when = completion::complete;
};

/// The same plans every pass. `begin(i)` ends the plan of the step before, makes step i's plan
/// the one in force (sent ahead at the step before, or now) and sends step i + 1's plan without
/// waiting for it, so that its data moves while step i runs. A plan the budget did not hold
/// ahead is issued at its own step, where a refusal is the caller's. Not thread-safe: one
/// caller steps it.
class access_sequence {
 public:
  /// Refuses (invalid_argument) an empty sequence or a step with no ref, before anything is
  /// sent.
  access_sequence(client& c, std::vector<access_step> steps);
  access_sequence(const access_sequence&) = delete;
  access_sequence& operator=(const access_sequence&) = delete;
  /// Ends the plans still held (errors are logged: the allocator may be gone).
  ~access_sequence();

  /// Step `i` (taken modulo the sequence's length) is about to run: returns step i's plan's
  /// moves once they are done (or issued, per the step's `reply_when`).
  residency_result begin(std::size_t i);
  /// Ends every plan the sequence holds.
  void finish();

  [[nodiscard]] std::size_t size() const noexcept { return steps_.size(); }
  /// Plans issued ahead, and those that the budget did not hold ahead.
  [[nodiscard]] std::size_t issued_ahead() const noexcept { return ahead_; }
  [[nodiscard]] std::size_t refused_ahead() const noexcept { return refused_ahead_; }

 private:
  residency_result issue(std::size_t step);
  /// The plan sent ahead, if any, with its reply: held from now on; nullopt when the budget
  /// did not hold it (or nothing was sent ahead).
  std::optional<std::pair<std::size_t, residency_result>> collect_ahead();
  void end(std::size_t step);

  client& client_;
  std::vector<access_step> steps_;
  std::vector<bool> held_;
  std::optional<std::size_t> current_;
  std::optional<std::pair<std::size_t, pending_plan>> ahead_plan_;  ///< step, its reply
  std::size_t ahead_ = 0;
  std::size_t refused_ahead_ = 0;
};

}  // namespace uma
