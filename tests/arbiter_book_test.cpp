// The arbiter's book (actors/remote/arbiter/detail/arbiter_book.hpp) driven with explicit time:
// what a join grants, how bytes move from one member to another only once the first has
// acknowledged its shrink, priorities, idle lending, the operator's policies and totals,
// deadlines, and refusals that leave everything as it was. After every step the members' held
// bytes of each device are checked against its total.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <uma/actors/remote/arbiter/detail/arbiter_book.hpp>
#include <uma/sys/error.hpp>

namespace uma {
namespace {

using detail::arbiter_book;
using namespace std::chrono_literals;

constexpr std::uint64_t MiB = 1024 * 1024, GiB = 1024 * MiB;
const arbiter_book::time_point t0 = arbiter_book::time_point{} + 1h;

arbiter_claim claim(std::uint64_t wanted, std::uint64_t min = 0, std::uint32_t priority = 0,
                    int device = 0) {
  return arbiter_claim{device, min, wanted, priority, 1, false};
}

/// Everything a report says, as text: two equal texts are two equal reports.
std::string text(const arbiter_report& r) {
  std::ostringstream out;
  out << "members " << r.members << " revocations " << r.revocations << "\n";
  for (const auto& d : r.devices) {
    out << "device " << d.device << " total " << d.total_bytes << " held " << d.held_bytes << "\n";
    for (const auto& m : d.members)
      out << " " << m.member << " " << m.tenant << " min " << m.claim.min_bytes << " wanted "
          << m.claim.wanted_bytes << " prio " << m.claim.priority << " weight " << m.claim.weight
          << " idle " << m.claim.idle << " granted " << m.granted_bytes << " held " << m.held_bytes
          << " resident " << m.resident_bytes << " " << m.state << " grown " << m.grown_bytes
          << " shrunk " << m.shrunk_bytes << " shrinks " << m.shrinks << "\n";
  }
  for (const auto& d : r.decisions)
    out << d.at.count() << " " << d.member << " " << d.tenant << " " << d.device << " "
        << d.from_bytes << "->" << d.to_bytes << " " << d.why << "\n";
  return out.str();
}

class ArbiterBook : public ::testing::Test {
 protected:
  static detail::arbiter_settings settings() {
    detail::arbiter_settings s;
    s.totals = {{0, GiB}, {1, 512 * MiB}};
    s.evict_deadline = 10s;
    return s;
  }

  /// The row of `member` on `device` (fails the test when there is none).
  arbiter_member_row row(std::uint64_t member, int device = 0) {
    for (const auto& d : book_.report({}).devices)
      for (const auto& m : d.members)
        if (d.device == device && m.member == member)
          return m;
    ADD_FAILURE() << "member " << member << " has no row on device " << device;
    return {};
  }

  /// Takes the grants and checks the invariant: no device's held bytes above its total.
  std::vector<arbiter_grant> grants() {
    for (const auto& d : book_.report({}).devices) {
      std::uint64_t held = 0;
      for (const auto& m : d.members)
        held += m.held_bytes;
      EXPECT_EQ(held, d.held_bytes);
      EXPECT_LE(d.held_bytes, d.total_bytes) << "device " << d.device;
    }
    return book_.take_grants();
  }

  /// A and B each wanting the whole of device 0; A has it, B's first grant is 0, A must shrink.
  void two_members_contend() {
    a_ = book_.join("uid 1", "a", {claim(GiB)}, t0);
    static_cast<void>(grants());
    b_ = book_.join("uid 2", "b", {claim(GiB)}, t0 + 1s);
    static_cast<void>(grants());
  }

  arbiter_book book_{settings(), t0};
  std::uint64_t a_ = 0, b_ = 0;
};

TEST_F(ArbiterBook, AJoinIsGrantedItsWantWhenItFits) {
  const auto id = book_.join("uid 1000", "infer", {claim(256 * MiB), claim(MiB, 0, 0, 1)}, t0);
  const auto sent = grants();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].member, id);
  EXPECT_EQ(sent[0].device, 0);
  EXPECT_EQ(sent[0].budget_bytes, 256 * MiB);
  EXPECT_EQ(sent[1].device, 1);
  EXPECT_EQ(sent[1].budget_bytes, MiB);
  EXPECT_FALSE(sent[0].shrink);
  EXPECT_NE(sent[0].sequence, sent[1].sequence);
  EXPECT_EQ(row(id).state, "active");
  EXPECT_EQ(row(id).tenant, "uid 1000/infer");
  EXPECT_EQ(row(id).held_bytes, 256 * MiB);
}

TEST_F(ArbiterBook, ASecondJoinShrinksTheFirstAndGrowsOnlyAfterTheAcknowledgement) {
  a_ = book_.join("uid 1", "a", {claim(GiB)}, t0);
  EXPECT_EQ(grants().at(0).budget_bytes, GiB);
  b_ = book_.join("uid 2", "b", {claim(GiB)}, t0 + 1s);
  const auto sent = grants();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].member, b_);  // its starting budget, though nothing is free yet
  EXPECT_EQ(sent[0].budget_bytes, 0u);
  EXPECT_EQ(sent[1].member, a_);
  EXPECT_TRUE(sent[1].shrink);
  EXPECT_EQ(sent[1].budget_bytes, 512 * MiB);
  EXPECT_EQ(sent[1].deadline, 10s);
  EXPECT_EQ(row(a_).state, "shrinking");
  EXPECT_EQ(row(a_).held_bytes, GiB);

  // Part of the way: what it evicted goes to B at once, the rest still counts as A's.
  book_.evicted(a_, "uid 1", 0, sent[1].sequence, 700 * MiB, t0 + 2s);
  auto more = grants();
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0].member, b_);
  EXPECT_EQ(more[0].budget_bytes, 324 * MiB);
  EXPECT_EQ(row(a_).state, "shrinking");
  EXPECT_EQ(row(a_).held_bytes, 700 * MiB);

  book_.evicted(a_, "uid 1", 0, sent[1].sequence, 500 * MiB, t0 + 4s);
  more = grants();
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0].budget_bytes, 512 * MiB);
  EXPECT_EQ(row(a_).state, "active");
  EXPECT_EQ(row(a_).held_bytes, 512 * MiB);
  EXPECT_EQ(row(a_).resident_bytes, 500 * MiB);
  EXPECT_EQ(row(a_).shrinks, 1u);
  EXPECT_EQ(row(a_).shrunk_bytes, 512 * MiB);
  EXPECT_EQ(row(a_).slowest_shrink, 3s);
  EXPECT_EQ(row(b_).grown_bytes, 512 * MiB);
  EXPECT_FALSE(book_.next_deadline());
}

TEST_F(ArbiterBook, AHigherPriorityMemberGetsItsWant) {
  book_.set_policy("uid 2/high", 0, arbiter_policy{0, 10, 1}, t0);
  a_ = book_.join("uid 1", "low", {claim(GiB)}, t0);
  b_ = book_.join("uid 2", "high", {claim(600 * MiB, 0, 10)}, t0);
  const auto sent = grants();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[2].budget_bytes, 424 * MiB);
  book_.evicted(a_, "uid 1", 0, sent[2].sequence, 424 * MiB, t0 + 1s);
  const auto more = grants();
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0].member, b_);
  EXPECT_EQ(more[0].budget_bytes, 600 * MiB);
}

TEST_F(ArbiterBook, AnIdleMemberLendsAndIsReclaimedWhenBusy) {
  book_.set_policy("uid 1/a", 0, arbiter_policy{128 * MiB, 0, 1}, t0);
  a_ = book_.join("uid 1", "a", {claim(GiB, 128 * MiB)}, t0);
  static_cast<void>(grants());
  book_.demand(a_, "uid 1", 0, GiB, true, t0 + 1s);
  auto sent = grants();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].budget_bytes, 128 * MiB);
  EXPECT_EQ(row(a_).state, "shrinking");
  book_.evicted(a_, "uid 1", 0, sent[0].sequence, 100 * MiB, t0 + 2s);
  EXPECT_EQ(row(a_).state, "idle");
  b_ = book_.join("uid 2", "b", {claim(GiB)}, t0 + 3s);
  EXPECT_EQ(grants().at(0).budget_bytes, 896 * MiB);  // all A lends

  // Busy again: B gives back. A's minimum is its own; the 896 MiB above it are shared evenly.
  book_.demand(a_, "uid 1", 0, GiB, false, t0 + 4s);
  sent = grants();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].member, b_);
  EXPECT_TRUE(sent[0].shrink);
  EXPECT_EQ(sent[0].budget_bytes, 448 * MiB);
  book_.evicted(b_, "uid 2", 0, sent[0].sequence, 448 * MiB, t0 + 5s);
  sent = grants();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].member, a_);
  EXPECT_EQ(sent[0].budget_bytes, 576 * MiB);
}

TEST_F(ArbiterBook, TheOperatorRaisingAPriorityLiftsTheMembersThereAtOnce) {
  a_ = book_.join("uid 1", "a", {claim(GiB)}, t0);
  static_cast<void>(grants());
  b_ = book_.join("uid 2", "b", {claim(GiB)}, t0);
  const auto shrink = grants();
  ASSERT_EQ(shrink.size(), 2u);  // b's first grant (0 bytes), a's shrink to half
  ASSERT_TRUE(shrink[1].shrink);
  book_.evicted(a_, "uid 1", 0, shrink[1].sequence, 512 * MiB, t0);
  static_cast<void>(grants());
  ASSERT_EQ(row(b_).granted_bytes, 512 * MiB);
  // The operator gives b's tenant priority 3: b's want is met first, a shrinks to what is left.
  book_.set_policy("uid 2/b", 0, arbiter_policy{0, 3, 1}, t0 + 1s);
  EXPECT_EQ(row(b_).claim.priority, 3u);
  auto sent = grants();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].member, a_);
  EXPECT_TRUE(sent[0].shrink);
  EXPECT_EQ(sent[0].budget_bytes, 0u);
  book_.evicted(a_, "uid 1", 0, sent[0].sequence, 0, t0 + 2s);
  sent = grants();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].member, b_);
  EXPECT_EQ(sent[0].budget_bytes, GiB);
}

TEST_F(ArbiterBook, RefusedCallsChangeNothing) {
  book_.set_policy("uid 1/a", 0, arbiter_policy{64 * MiB, 2, 4}, t0);
  two_members_contend();
  const auto before = text(book_.report({}));
  struct refusal {
    const char* what;
    errc code;
    std::function<void()> call;
  };
  auto own = [](std::uint64_t min, std::uint32_t prio, std::uint32_t weight) {
    return std::vector<arbiter_claim>{arbiter_claim{0, min, GiB, prio, weight, false}};
  };
  const std::vector<refusal> refusals{
      {"minimum above policy", errc::invalid_argument,
       [&] { book_.join("uid 1", "a", own(128 * MiB, 0, 1), t0); }},
      {"priority above policy", errc::invalid_argument,
       [&] { book_.join("uid 1", "a", own(0, 3, 1), t0); }},
      {"weight above policy", errc::invalid_argument,
       [&] { book_.join("uid 1", "a", own(0, 0, 5), t0); }},
      {"weight 0", errc::invalid_argument, [&] { book_.join("uid 1", "a", own(0, 0, 0), t0); }},
      {"wanted 2^63", errc::invalid_argument,
       [&] { book_.join("uid 3", "c", {claim(std::uint64_t{1} << 63)}, t0); }},
      {"wanted below min", errc::invalid_argument,
       [&] { book_.join("uid 1", "a", {claim(MiB, 64 * MiB)}, t0); }},
      {"empty name", errc::invalid_argument, [&] { book_.join("uid 3", "", {claim(MiB)}, t0); }},
      {"long name", errc::invalid_argument,
       [&] { book_.join("uid 3", std::string(65, 'x'), {claim(MiB)}, t0); }},
      {"slash", errc::invalid_argument, [&] { book_.join("uid 3", "a/b", {claim(MiB)}, t0); }},
      {"control", errc::invalid_argument, [&] { book_.join("uid 3", "a\nb", {claim(MiB)}, t0); }},
      {"no claims", errc::invalid_argument, [&] { book_.join("uid 3", "c", {}, t0); }},
      {"unknown device", errc::invalid_argument,
       [&] { book_.join("uid 3", "c", {claim(MiB, 0, 0, 7)}, t0); }},
      {"device twice", errc::invalid_argument,
       [&] {
         book_.join("uid 3", "c", {claim(MiB), claim(MiB)}, t0);
       }},
      {"foreign demand", errc::invalid_argument,
       [&] { book_.demand(a_, "uid 2", 0, MiB, false, t0); }},
      {"demand unclaimed device", errc::invalid_argument,
       [&] { book_.demand(a_, "uid 1", 1, MiB, false, t0); }},
      {"demand above total", errc::invalid_argument,
       [&] { book_.demand(a_, "uid 1", 0, std::uint64_t{1} << 63, false, t0); }},
      {"demand not a member", errc::invalid_argument,
       [&] { book_.demand(99, "uid 1", 0, MiB, false, t0); }},
      {"foreign evicted", errc::invalid_argument, [&] { book_.evicted(a_, "uid 2", 0, 2, 0, t0); }},
      {"evicted sequence 0", errc::invalid_argument,
       [&] { book_.evicted(a_, "uid 1", 0, 0, 0, t0); }},
      {"evicted sequence never sent", errc::invalid_argument,
       [&] { book_.evicted(a_, "uid 1", 0, 3, 0, t0); }},
      {"policy weight 1001", errc::invalid_argument,
       [&] {
         book_.set_policy("uid 1/a", 0, arbiter_policy{0, 0, 1001}, t0);
       }},
      {"policy min above total", errc::invalid_argument,
       [&] {
         book_.set_policy("uid 1/a", 0, arbiter_policy{2 * GiB, 0, 1}, t0);
       }},
      {"policy unknown device", errc::invalid_argument,
       [&] { book_.set_policy("uid 1/a", 5, arbiter_policy{}, t0); }},
      {"policy not a tenant", errc::invalid_argument,
       [&] { book_.set_policy("nobody", 0, arbiter_policy{}, t0); }},
      {"total below a page", errc::invalid_argument, [&] { book_.set_total(0, 100, t0); }},
      {"total unknown device", errc::invalid_argument, [&] { book_.set_total(3, GiB, t0); }},
  };
  for (const auto& r : refusals) {
    try {
      r.call();
      ADD_FAILURE() << r.what << ": not refused";
    } catch (const error& e) {
      EXPECT_EQ(e.code(), r.code) << r.what << ": " << e.what();
    }
    EXPECT_EQ(text(book_.report({})), before) << r.what;
    EXPECT_TRUE(book_.take_grants().empty()) << r.what;
  }
  EXPECT_EQ(book_.join("uid 3", "c", {claim(MiB)}, t0), 3u);  // no refused join took an id
}

TEST_F(ArbiterBook, RefusalsNameTheNumbers) {
  try {
    book_.join("uid 1000", "infer", {arbiter_claim{0, 8 * GiB, 8 * GiB, 0, 1, false}}, t0);
    FAIL() << "not refused";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    EXPECT_NE(std::string{e.what()}.find("8589934592"), std::string::npos) << e.what();
    EXPECT_NE(std::string{e.what()}.find("uid 1000/infer"), std::string::npos) << e.what();
  }
}

TEST_F(ArbiterBook, MinimumsThatWouldPassTheTotalAreRefused) {
  book_.set_policy("uid 1/a", 0, arbiter_policy{768 * MiB, 0, 1}, t0);
  book_.set_policy("uid 2/b", 0, arbiter_policy{512 * MiB, 0, 1}, t0);
  a_ = book_.join("uid 1", "a", {claim(GiB, 768 * MiB)}, t0);
  const auto before = text(book_.report({}));
  try {
    book_.join("uid 2", "b", {claim(GiB, 512 * MiB)}, t0);
    FAIL() << "not refused";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::quota_exceeded) << e.what();
  }
  EXPECT_EQ(text(book_.report({})), before);
}

TEST_F(ArbiterBook, AMissedDeadlineRevokesEveryGrantAndFreesItsBytes) {
  two_members_contend();
  ASSERT_TRUE(book_.next_deadline());
  EXPECT_EQ(*book_.next_deadline(), t0 + 11s);
  EXPECT_EQ(book_.expire(t0 + 10s), 0u);
  EXPECT_TRUE(grants().empty());
  EXPECT_EQ(book_.expire(t0 + 11s), 1u);
  const auto sent = grants();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].member, a_);
  EXPECT_TRUE(sent[0].revoked);
  EXPECT_EQ(sent[0].budget_bytes, 0u);
  EXPECT_EQ(sent[1].member, b_);
  EXPECT_EQ(sent[1].budget_bytes, GiB);
  EXPECT_EQ(row(a_).state, "revoked");
  EXPECT_EQ(row(a_).held_bytes, 0u);
  EXPECT_EQ(book_.report({}).revocations, 1u);
  EXPECT_FALSE(book_.next_deadline());
  EXPECT_THROW(book_.demand(a_, "uid 1", 0, MiB, false, t0 + 12s), error);
  EXPECT_THROW(book_.evicted(a_, "uid 1", 0, 2, 0, t0 + 12s), error);
  book_.leave(a_, "connection closed", t0 + 13s);
  EXPECT_FALSE(book_.is_member(a_));
}

TEST_F(ArbiterBook, AnotherShrinkDoesNotPutTheDeadlineOff) {
  two_members_contend();  // a told at t0 + 1s to shrink to 512 MiB: deadline t0 + 11s
  // a's own demands make the arbiter shrink and raise it again, without evicting anything.
  book_.demand(a_, "uid 1", 0, 0, false, t0 + 9s);
  book_.demand(a_, "uid 1", 0, GiB, false, t0 + 10s);
  static_cast<void>(grants());
  ASSERT_TRUE(book_.next_deadline());
  EXPECT_EQ(*book_.next_deadline(), t0 + 11s);
  EXPECT_EQ(book_.expire(t0 + 11s), 1u);
  EXPECT_EQ(row(a_).state, "revoked");
}

TEST_F(ArbiterBook, LeavingFreesItsBytesAtOnce) {
  two_members_contend();
  book_.leave(a_, "connection closed", t0 + 2s);  // its shrink never acknowledged
  const auto sent = grants();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].member, b_);
  EXPECT_EQ(sent[0].budget_bytes, GiB);
  EXPECT_FALSE(book_.is_member(a_));
  EXPECT_FALSE(book_.next_deadline());
  EXPECT_EQ(book_.report({}).members, 1u);
}

TEST_F(ArbiterBook, APolicyCapsTheMembersOfItsTenant) {
  book_.set_policy("uid 1/a", 0, arbiter_policy{256 * MiB, 5, 3}, t0);
  a_ = book_.join("uid 1", "a", {arbiter_claim{0, 256 * MiB, GiB, 5, 3, false}}, t0);
  b_ = book_.join("uid 2", "b", {claim(GiB)}, t0);
  static_cast<void>(grants());
  book_.set_policy("uid 1/a", 0, arbiter_policy{64 * MiB, 0, 1}, t0 + 1s);
  const auto capped = row(a_).claim;
  EXPECT_EQ(capped.min_bytes, 64 * MiB);
  EXPECT_EQ(capped.priority, 0u);
  EXPECT_EQ(capped.weight, 1u);
  EXPECT_EQ(capped.wanted_bytes, GiB);
  const auto sent = grants();
  // A had all of it; now its 64 MiB minimum, then half of the other 960 MiB.
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].member, a_);
  EXPECT_TRUE(sent[0].shrink);
  EXPECT_EQ(sent[0].budget_bytes, 544 * MiB);
}

TEST_F(ArbiterBook, ATotalBelowTheMinimumsIsRefusedAndALowerOneShrinks) {
  book_.set_policy("uid 1/a", 0, arbiter_policy{256 * MiB, 0, 1}, t0);
  a_ = book_.join("uid 1", "a", {claim(GiB, 256 * MiB)}, t0);
  static_cast<void>(grants());
  const auto before = text(book_.report({}));
  try {
    book_.set_total(0, 128 * MiB, t0);
    FAIL() << "not refused";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::quota_exceeded) << e.what();
  }
  EXPECT_EQ(text(book_.report({})), before);
  book_.set_total(0, 512 * MiB, t0 + 1s);
  const auto sent = book_.take_grants();  // held passes the new total until A evicts
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(sent[0].shrink);
  EXPECT_EQ(sent[0].budget_bytes, 512 * MiB);
  book_.evicted(a_, "uid 1", 0, sent[0].sequence, 512 * MiB, t0 + 2s);
  EXPECT_TRUE(grants().empty());
}

TEST_F(ArbiterBook, TheLedgerKeepsItsLength) {
  auto s = settings();
  s.ledger_length = 3;
  arbiter_book book{s, t0};
  const auto a = book.join("uid 1", "a", {claim(GiB)}, t0);
  for (int i = 1; i <= 10; ++i)
    book.demand(a, "uid 1", 0, static_cast<std::uint64_t>(i) * MiB, false, t0 + i * 1s);
  const auto decisions = book.report({}).decisions;
  ASSERT_EQ(decisions.size(), 3u);
  EXPECT_EQ(decisions.back().to_bytes, 10 * MiB);
  EXPECT_EQ(decisions.back().at, 10s);
  EXPECT_EQ(decisions.front().at, 8s);
}

TEST_F(ArbiterBook, ATenantSeesOnlyItsOwnMembersAndDecisions) {
  two_members_contend();
  const auto mine = book_.report("uid 2");
  EXPECT_EQ(mine.members, 1u);
  ASSERT_EQ(mine.devices.at(0).members.size(), 1u);
  EXPECT_EQ(mine.devices.at(0).members[0].member, b_);
  EXPECT_EQ(mine.devices.at(0).held_bytes, GiB);  // the totals are everyone's
  ASSERT_FALSE(mine.decisions.empty());
  for (const auto& d : mine.decisions)
    EXPECT_EQ(d.tenant, "uid 2/b");
  EXPECT_GT(book_.report({}).decisions.size(), mine.decisions.size());
}

TEST_F(ArbiterBook, BadSettingsAreRefused) {
  auto s = settings();
  s.totals[2] = 0;
  EXPECT_THROW((arbiter_book{s, t0}), error);
  s = settings();
  s.totals[-1] = GiB;
  EXPECT_THROW((arbiter_book{s, t0}), error);
  s = settings();
  s.evict_deadline = 0ms;
  EXPECT_THROW((arbiter_book{s, t0}), error);
}

}  // namespace
}  // namespace uma
