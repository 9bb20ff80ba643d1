#pragma once

// The sequence form of access plans (issue 15, docs/residency.md): iterative work names its
// steps once, and each step's plan is issued one step ahead, so that the next step's data moves
// while the current step runs (the allocator's lanes carry placements and evictions at once).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <uma/actors/client.hpp>
#include <uma/messages/requests.hpp>

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
  std::string tenant{};  ///< the tenant the step's regions count for (docs/residency.md)
  /// Ranges by address, planned beside `refs` (access_plan_request::ranges).
  std::vector<address_range> ranges{};
};

/// The same plans every pass. `begin(i)` ends the plan of the step before, makes step i's plan
/// the one in force (sent ahead earlier, or now) and sends the plans of the `lookahead` steps
/// after it without waiting for them, so that their data moves while step i runs (the
/// allocator's device lane takes them one after another: the link stays busy). A plan the
/// budget did not hold ahead is sent again at the next step and issued at its own step at the
/// latest, where a refusal is the caller's; before that, plans held ahead of it are ended to
/// make room. Not thread-safe: one caller steps it.
class access_sequence {
 public:
  /// Refuses (invalid_argument) an empty sequence, a step with no ref or range, or a lookahead of
  /// the sequence's length or more, before anything is sent.
  access_sequence(client& c, std::vector<access_step> steps, std::size_t lookahead = 1);
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
  [[nodiscard]] std::size_t lookahead() const noexcept { return lookahead_; }
  /// Plans held from ahead, and those that the budget did not hold ahead.
  [[nodiscard]] std::size_t issued_ahead() const noexcept { return ahead_; }
  [[nodiscard]] std::size_t refused_ahead() const noexcept { return refused_ahead_; }

 private:
  residency_result issue(std::size_t step);
  [[nodiscard]] access_plan_request request_of(const access_step& s) const;
  /// Takes the replies of the plans sent ahead, in the order sent, up to and including
  /// `step`'s (all of them when it has none): each is held from then on unless the budget
  /// refused it. Returns `step`'s reply if it was sent ahead and held.
  std::optional<residency_result> collect_until(std::size_t step);
  [[nodiscard]] bool sent_ahead(std::size_t step) const noexcept;
  void end(std::size_t step);

  client& client_;
  std::vector<access_step> steps_;
  std::size_t lookahead_;
  std::vector<bool> held_;
  cycle_hint cycle_{};  ///< the set and steps the sequence cycles through (auto's hint)
  std::optional<std::size_t> current_;
  std::deque<std::pair<std::size_t, pending_plan>> in_flight_;  ///< step, its reply; in order
  std::size_t ahead_ = 0;
  std::size_t refused_ahead_ = 0;
};

}  // namespace uma
