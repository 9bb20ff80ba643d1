// The remote gateway in one process (no middleman): sessions, leases, lookups by id and
// generation, quota, CUDA IPC refusal. tests/remote_process_test.cpp runs it across processes.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/remote/detail/remote_checks.hpp>
#include <uma/actors/remote/detail/remote_sessions.hpp>
#include <uma/actors/remote/remote_gateway.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include "support/actor_fixture.hpp"
#include "support/gateway_request.hpp"

namespace uma {
namespace {

using namespace std::chrono_literals;

/// Stands in for a remote peer's session actor. (It takes an argument because CAF 0.17 binds a
/// null reference for a function actor spawned without any, which UBSan reports.)
caf::behavior idle_peer(int) {
  return {[](int) {}};
}

class gateway : public test::actor_fixture {
 protected:
  void SetUp() override {
    supervisor_config cfg;
    cfg.allocator.backend.instance = faults_;
    cfg.backoff_initial = 0ms;
    sup_ = spawn_supervisor(sys_, std::move(cfg));
    start_gateway({});
    baseline_ = local().flush().live_bytes;
  }

  /// (Re)starts the gateway with `cfg` (and this fixture's operator key) and opens a session.
  void start_gateway(gateway_config cfg) {
    if (gw_)
      caf::anon_send_exit(gw_, caf::exit_reason::user_shutdown);
    if (peer_)
      caf::anon_send_exit(peer_, caf::exit_reason::user_shutdown);
    cfg.operator_secret = operator_;
    gw_ = spawn_remote_gateway(sys_, sup_, std::move(cfg));
    peer_ = sys_.spawn(idle_peer, 0);
    session_ = ask<session_key>(open_session_atom_v, peer_);
  }

  void TearDown() override {
    caf::anon_send_exit(peer_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(gw_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(sup_, caf::exit_reason::user_shutdown);
  }

  /// One request to the gateway; a uma error reply is thrown.
  template <class R, class... Ts>
  R ask(Ts&&... xs) {
    return test::request_gateway<R>(sys_, gw_, std::forward<Ts>(xs)...);
  }

  region_handle allocate(std::uint64_t bytes, std::string label = "remote") {
    return ask<region_handle>(allocate_atom_v, session_,
                              remote_allocate_request{bytes, 0, attach_flag::global, label});
  }

  remote_op_result prefetch(region_handle h, location where = location::host()) {
    return ask<remote_op_result>(prefetch_atom_v, session_,
                                 remote_prefetch_request{{h}, {where}, completion::enqueued});
  }

  /// The same supervisor, seen through a local facade.
  client& local() {
    if (!local_)
      local_ = std::make_unique<client>(sys_, sup_);
    local_->set_max_block_bytes(0);  // the message path: tests count its bytes per request
    return *local_;
  }

  /// Waits (bounded) until the local allocator's live bytes are `bytes`.
  std::uint64_t await_live_bytes(std::uint64_t bytes) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    auto live = local().flush().live_bytes;
    while (live != bytes && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
      live = local().flush().live_bytes;
    }
    return live;
  }

  /// Waits (bounded) until the supervisor runs `generation`.
  void await_generation(std::uint64_t generation) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    auto s = query_supervision(sys_, sup_);
    while ((s.current_generation != generation || s.state != supervisor_state::running) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
      s = query_supervision(sys_, sup_);
    }
    ASSERT_EQ(s.current_generation, generation) << to_string(s.state);
    ASSERT_EQ(s.state, supervisor_state::running);
  }

  std::shared_ptr<fault_injecting_backend> faults_ =
      std::make_shared<fault_injecting_backend>(backend_);
  allocator_supervisor_actor sup_;
  remote_allocator_actor gw_;
  caf::actor peer_;
  operator_key operator_ = make_operator_key();
  session_key session_{};
  std::uint64_t baseline_ = 0;
  std::unique_ptr<client> local_;
};

TEST_F(gateway, ARemoteAllocationIsALeaseInTheLocalRegionTable) {
  const auto h = allocate(4096, "weights");
  EXPECT_EQ(h, (region_handle{1, 1}));
  const auto rows = local().regions();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id, 1u);
  EXPECT_EQ(rows[0].label, "weights");
  EXPECT_EQ(rows[0].bytes, 4096u);
  EXPECT_EQ(rows[0].refs, 1);  // the lease
  EXPECT_EQ(local().stats().live_bytes, baseline_ + 4096);
}

TEST_F(gateway, PrefetchAndAdviceByIdChangeWhatTheServingNodeReads) {
  const auto h = allocate(8192);
  const auto before = local().stats();
  const auto done = prefetch(h, location::host());
  EXPECT_EQ(done.ranges, 1u);
  EXPECT_EQ(done.bytes, 8192u);
  static_cast<void>(ask<remote_op_result>(
      advise_atom_v, session_,
      remote_advise_request{{h}, advice::set_preferred_location, location::host()}));
  static_cast<void>(ask<remote_op_result>(advise_atom_v, session_,
                                          remote_advise_request{{h}, advice::set_read_mostly}));
  const auto after = local().flush();
  EXPECT_EQ(after.prefetches, before.prefetches + 1);
  EXPECT_EQ(after.advises, before.advises + 2);
  const auto attrs = to_local(ask<remote_attributes>(attributes_atom_v, session_, h));
  EXPECT_TRUE(attrs.read_mostly);
  EXPECT_EQ(attrs.preferred_location, location::host());
  EXPECT_EQ(attrs.last_prefetch_location, location::host());
  const auto rows = ask<remote_region_page>(leased_regions_atom_v, session_, region_page{}).rows;
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].session, session_.id);
  ASSERT_TRUE(rows[0].attributes_known);
  EXPECT_EQ(to_local(rows[0].attributes), attrs);
}

TEST_F(gateway, RemoteStatsAreTheLocalAllocatorsStats) {
  const auto h = allocate(4096);
  prefetch(h);
  const auto local_stats = local().flush();
  const auto remote = ask<remote_stats>(stats_atom_v);
  EXPECT_EQ(remote.allocator, local_stats);
  EXPECT_EQ(remote.supervisor, supervisor_state::running);
  EXPECT_EQ(remote.sessions, 1u);
  EXPECT_EQ(remote.leases, 1u);
  EXPECT_EQ(remote.leased_bytes, 4096u);
}

TEST_F(gateway, ReleasingALeaseGivesTheMemoryBack) {
  const auto h = allocate(65536);
  EXPECT_EQ(ask<std::uint64_t>(release_atom_v, session_, h), 65536u);
  EXPECT_EQ(await_live_bytes(baseline_), baseline_);
  UMA_EXPECT_ERROR(prefetch(h), errc::invalid_argument, "is not leased by session 1");
}

TEST_F(gateway, APeerGoingDownEndsItsSessionAndReleasesItsLeases) {
  for (int i = 0; i < 3; ++i)
    static_cast<void>(allocate(16384));
  EXPECT_EQ(local().stats().live_bytes, baseline_ + 3 * 16384);
  caf::anon_send_exit(peer_, caf::exit_reason::kill);
  EXPECT_EQ(await_live_bytes(baseline_), baseline_);
  const auto s = ask<remote_stats>(stats_atom_v);
  EXPECT_EQ(s.sessions, 0u);
  EXPECT_EQ(s.sessions_lost, 1u);
  EXPECT_EQ(s.leases, 0u);
  UMA_EXPECT_ERROR(allocate(64), errc::invalid_argument, "session 1 is not open");
}

TEST_F(gateway, ClosingASessionReleasesItsLeases) {
  static_cast<void>(allocate(4096));
  static_cast<void>(allocate(4096));
  EXPECT_EQ(ask<std::uint64_t>(close_session_atom_v, session_), 2u);
  EXPECT_EQ(await_live_bytes(baseline_), baseline_);
  UMA_EXPECT_ERROR(ask<std::uint64_t>(close_session_atom_v, session_), errc::invalid_argument,
                   "session 1 is not open");
}

TEST_F(gateway, ASessionCannotUseAnotherSessionsLease) {
  const auto h = allocate(4096);
  auto other_peer = sys_.spawn(idle_peer, 0);
  const auto other = ask<session_key>(open_session_atom_v, other_peer);
  UMA_EXPECT_ERROR(ask<remote_attributes>(attributes_atom_v, other, h), errc::invalid_argument,
                   "region 1 of generation 1 is not leased by session 2");
  caf::anon_send_exit(other_peer, caf::exit_reason::user_shutdown);
}

TEST_F(gateway, AWrongGenerationIsRefusedNamingTheIdAndBothGenerations) {
  const auto h = allocate(4096);
  UMA_EXPECT_ERROR(prefetch({h.id, 2}), errc::invalid_argument,
                   "prefetch: region 1 of generation 2 does not exist: the allocator now runs "
                   "generation 1; session 1 leases region 1 of generation 1 instead");
  UMA_EXPECT_ERROR(prefetch({h.id, 0}), errc::invalid_argument, "generations start at 1");
  UMA_EXPECT_ERROR(prefetch({99, 1}), errc::invalid_argument,
                   "region 99 of generation 1 is not leased by session 1");
}

TEST_F(gateway, AStaleGenerationAfterARestartIsRefused) {
  const auto old = allocate(4096);
  faults_->inject({backend_op::prefetch, 1, errc::context_lost});
  UMA_EXPECT_ERROR(prefetch(old), errc::context_lost, "injected fault");
  await_generation(2);
  UMA_EXPECT_ERROR(prefetch(old), errc::allocator_stopped,
                   "prefetch: region 1 of generation 1 is stale: its allocator incarnation "
                   "stopped and the allocator now runs generation 2");
  const auto fresh = allocate(4096);
  EXPECT_EQ(fresh, (region_handle{1, 2}));  // ids restart with each generation
  EXPECT_EQ(prefetch(fresh).ranges, 1u);
  EXPECT_EQ(ask<std::uint64_t>(release_atom_v, session_, old), 0u);  // its memory went already
  UMA_EXPECT_ERROR(prefetch(old), errc::allocator_stopped,
                   "region 1 of generation 1 is stale: the allocator now runs generation 2; "
                   "session 1 leases region 1 of generation 2 instead");
}

TEST_F(gateway, ABatchWithOneUnknownRegionChangesNothing) {
  const auto h = allocate(4096);
  const auto before = local().flush().prefetches;
  UMA_EXPECT_ERROR(
      ask<remote_op_result>(
          prefetch_atom_v, session_,
          remote_prefetch_request{{h, {7, 1}}, {location::host()}, completion::enqueued}),
      errc::invalid_argument, "region 7 of generation 1");
  EXPECT_EQ(local().flush().prefetches, before);
}

TEST_F(gateway, ManagedMemoryIsNeverExportedOverCudaIpc) {
  const auto h = allocate(4096);
  UMA_EXPECT_ERROR(ask<std::vector<char>>(export_ipc_atom_v, session_, h), errc::not_supported,
                   "managed memory cannot be exported over CUDA IPC (cudaIpcGetMemHandle supports "
                   "device memory from cudaMalloc only); use the remote interface's region ids");
}

TEST_F(gateway, TheOperatorReadsAndSetsTheQuotaButNotBelowTheBytesHeld) {
  const auto initial = ask<std::uint64_t>(quota_atom_v, std::uint64_t{0});
  EXPECT_EQ(initial, backend_->default_quota());
  static_cast<void>(allocate(1 << 16));
  // The quota limits the bytes held from the backend (memory/limit_resource.hpp).
  UMA_EXPECT_ERRC(ask<std::uint64_t>(set_quota_atom_v, operator_, std::uint64_t{4096}),
                  errc::invalid_argument);
  EXPECT_EQ(ask<std::uint64_t>(quota_atom_v, std::uint64_t{0}), initial);  // unchanged
  EXPECT_EQ(ask<std::uint64_t>(set_quota_atom_v, operator_, std::uint64_t{1} << 20),
            std::uint64_t{1} << 20);
  EXPECT_EQ(local().stats().quota_bytes, std::uint64_t{1} << 20);
  UMA_EXPECT_ERROR(allocate(std::uint64_t{1} << 20), errc::quota_exceeded, "over the quota");
}

TEST_F(gateway, AQuotaSetThroughTheSupervisorOutlivesARestart) {
  EXPECT_EQ(local().quota(std::uint64_t{1} << 22), std::uint64_t{1} << 22);
  const auto h = allocate(4096);
  faults_->inject({backend_op::prefetch, 1, errc::context_lost});
  UMA_EXPECT_ERROR(prefetch(h), errc::context_lost, "injected fault");
  await_generation(2);
  EXPECT_EQ(local().quota(), std::uint64_t{1} << 22);
  EXPECT_EQ(local().stats().quota_bytes, std::uint64_t{1} << 22);
}

// -- hardening: authority, limits, input validation (docs/distributed.md, "Who may do what") ----

TEST_F(gateway, NamingAnotherSessionsIdWithoutItsSecretIsRefusedAndChangesNothing) {
  const auto victim = allocate(65536, "victim");
  auto attacker_peer = sys_.spawn(idle_peer, 0);
  const auto attacker = ask<session_key>(open_session_atom_v, attacker_peer);
  const auto live = local().flush().live_bytes;
  // The victim's id with the attacker's own secret, and with a guessed (zero) secret.
  for (const session_key forged : {session_key{session_.id, attacker.secret_hi, attacker.secret_lo},
                                   session_key{session_.id, 0, 0}}) {
    const auto refused =
        "session 1 is not open (never opened, closed, or its peer went down) or "
        "the key and node given are not the session's";
    UMA_EXPECT_ERROR(ask<std::uint64_t>(release_atom_v, forged, victim), errc::invalid_argument,
                     refused);
    UMA_EXPECT_ERROR(ask<remote_op_result>(discard_atom_v, forged,
                                           remote_discard_request{{victim}, completion::enqueued}),
                     errc::invalid_argument, refused);
    UMA_EXPECT_ERROR(
        ask<remote_op_result>(advise_atom_v, forged,
                              remote_advise_request{{victim}, advice::set_read_mostly}),
        errc::invalid_argument, refused);
    UMA_EXPECT_ERROR(ask<remote_op_result>(prefetch_atom_v, forged,
                                           remote_prefetch_request{{victim}, {location::host()}}),
                     errc::invalid_argument, refused);
    UMA_EXPECT_ERROR(ask<std::uint64_t>(close_session_atom_v, forged), errc::invalid_argument,
                     refused);
    UMA_EXPECT_ERROR(ask<remote_region_page>(leased_regions_atom_v, forged, region_page{}),
                     errc::invalid_argument, refused);
  }
  EXPECT_EQ(local().flush().live_bytes, live);
  EXPECT_EQ(local().flush().advises, 0u);
  EXPECT_EQ(prefetch(victim).bytes, 65536u);  // the victim's session and lease are intact
  EXPECT_EQ(ask<remote_stats>(stats_atom_v).sessions, 2u);
  caf::anon_send_exit(attacker_peer, caf::exit_reason::user_shutdown);
}

TEST_F(gateway, ATenantSeesOnlyItsOwnRegionsAndTheOperatorSeesAll) {
  static_cast<void>(allocate(4096, "mine"));
  auto other_peer = sys_.spawn(idle_peer, 0);
  const auto other = ask<session_key>(open_session_atom_v, other_peer);
  EXPECT_TRUE(ask<remote_region_page>(leased_regions_atom_v, other, region_page{}).rows.empty());
  EXPECT_EQ(ask<remote_region_page>(regions_atom_v, operator_, region_page{}).rows.size(), 1u);
  UMA_EXPECT_ERROR(ask<remote_region_page>(regions_atom_v, operator_key{1, 2}, region_page{}),
                   errc::invalid_argument, "regions needs the serving node's operator key");
  caf::anon_send_exit(other_peer, caf::exit_reason::user_shutdown);
}

TEST_F(gateway, RegionPagesAreCutAtTheGatewayAndCapped) {
  for (int i = 0; i < 5; ++i)
    static_cast<void>(allocate(4096, "row " + std::to_string(i)));
  const auto middle = ask<remote_region_page>(leased_regions_atom_v, session_, region_page{1, 2});
  EXPECT_EQ(middle.total, 5u);
  ASSERT_EQ(middle.rows.size(), 2u);
  EXPECT_EQ(middle.rows[0].region.label, "row 1");
  EXPECT_EQ(middle.rows[1].region.label, "row 2");
  EXPECT_TRUE(middle.rows[0].attributes_known);
  EXPECT_EQ(
      ask<remote_region_page>(leased_regions_atom_v, session_, region_page{4, 10}).rows.size(), 1u);
  const auto past = ask<remote_region_page>(leased_regions_atom_v, session_, region_page{9, 1});
  EXPECT_TRUE(past.rows.empty());
  EXPECT_EQ(past.total, 5u);
  // No page is longer than the cap, whatever is asked: the detail that cuts it, with a cap of 3.
  std::vector<remote_region_info> rows(10);
  EXPECT_EQ(detail::cut_page(rows, region_page{0, 1000}, 3).rows.size(), 3u);
  EXPECT_EQ(detail::cut_page(rows, region_page{0, 0}, 3).rows.size(), 3u);
  EXPECT_EQ(detail::cut_page(rows, region_page{~std::uint64_t{0}, 3}, 3).rows.size(), 0u);
}

/// Stands in for the supervisor: forwards every request to `dest` and counts the requests for
/// the whole region report (`regions_atom` alone).
caf::behavior counting_supervisor(caf::event_based_actor* self, caf::actor dest,
                                  std::shared_ptr<std::atomic<int>> reports) {
  self->set_default_handler(
      [self, dest, reports](caf::scheduled_actor*,
                            caf::message_view& xs) -> caf::result<caf::message> {
        auto msg = xs.move_content_to_message();
        if (msg.size() == 1 && msg.match_element<regions_atom>(0))
          ++*reports;
        self->delegate(dest, std::move(msg));
        return caf::delegated<caf::message>{};
      });
  return {[](int) {}};
}

// Issue 35, finding 4: each tenant's `Regions` page asked the allocator for its whole report
// (every tenant's rows) and filtered it. A tenant's page is cut from its own leases: it costs
// its own slice, and shows what the operator's page shows for the same regions.
TEST_F(gateway, ATenantsRegionsPageCostsItsOwnLeasesNotTheWholeReport) {
  auto reports = std::make_shared<std::atomic<int>>(0);
  auto proxy = sys_.spawn(counting_supervisor, caf::actor_cast<caf::actor>(sup_), reports);
  caf::anon_send_exit(gw_, caf::exit_reason::user_shutdown);
  gateway_config cfg;
  cfg.operator_secret = operator_;
  gw_ = spawn_remote_gateway(sys_, caf::actor_cast<allocator_supervisor_actor>(proxy), cfg);
  session_ = ask<session_key>(open_session_atom_v, peer_);
  std::vector<region_handle> mine;
  for (int i = 0; i < 3; ++i)
    mine.push_back(allocate(4096 * (i + 1), "mine " + std::to_string(i)));
  std::vector<ManagedRef<std::byte>> others;  // another tenant's table: 4096 rows
  for (int i = 0; i < 4096; ++i)
    others.push_back(local().allocate<std::byte>(64, {.label = "other"}));
  const auto page = ask<remote_region_page>(leased_regions_atom_v, session_, region_page{1, 5});
  EXPECT_EQ(*reports, 0);  // no report asked for: the page came from the session's leases
  EXPECT_EQ(page.total, 3u);
  ASSERT_EQ(page.rows.size(), 2u);
  const auto all = ask<remote_region_page>(regions_atom_v, operator_, region_page{0, 3});
  EXPECT_EQ(*reports, 1);  // the operator's page still reads the whole report
  EXPECT_GE(all.total, 3u + 4096u);
  for (std::size_t i = 0; i < page.rows.size(); ++i) {
    const auto& row = page.rows[i];
    const auto& theirs = all.rows[i + 1];  // the operator's rows by id: mine came first
    EXPECT_EQ(row.session, session_.id);
    EXPECT_TRUE(row.attributes_known);
    EXPECT_EQ(row.region.id, mine[i + 1].id);
    EXPECT_EQ(row.region.label, "mine " + std::to_string(i + 1));
    EXPECT_EQ(row.region.bytes, theirs.region.bytes);
    EXPECT_EQ(row.region.generation, theirs.region.generation);
    EXPECT_EQ(row.region.attach, theirs.region.attach);
    EXPECT_EQ(row.region.refs, theirs.region.refs);
    EXPECT_EQ(row.region.pins, theirs.region.pins);
    EXPECT_EQ(row.region.kind, theirs.region.kind);
    EXPECT_EQ(row.attributes, theirs.attributes);
  }
  caf::anon_send_exit(proxy, caf::exit_reason::user_shutdown);
}

/// The events of `s` for region `id` of generation `gen`, as "kind label" strings.
std::vector<std::string> events_of(const remote_snapshot& s, std::uint64_t id, std::uint64_t gen) {
  std::vector<std::string> out;
  for (const auto& e : s.events)
    if (e.region == id && e.generation == gen)
      out.push_back(std::string(to_string(e.kind)) + " " + e.label);
  return out;
}

TEST_F(gateway, TheOperatorsSnapshotShowsEveryTenantsRegionsWithTheirSessionsAndHistory) {
  const auto mine = allocate(4096, "weights");
  static_cast<void>(prefetch(mine, location::host()));
  static_cast<void>(ask<remote_op_result>(advise_atom_v, session_,
                                          remote_advise_request{{mine}, advice::set_read_mostly}));
  auto other_peer = sys_.spawn(idle_peer, 0);
  const auto other = ask<session_key>(open_session_atom_v, other_peer);
  const auto theirs = ask<region_handle>(allocate_atom_v, other,
                                         remote_allocate_request{8192, 0, attach_flag::host, "kv"});
  auto local_ref = local().allocate<float>(16, {.label = "local"});
  const auto gone = allocate(64, "scratch");
  EXPECT_EQ(ask<std::uint64_t>(release_atom_v, session_, gone), 64u);
  EXPECT_EQ(await_live_bytes(baseline_ + 4096 + 8192 + 64), baseline_ + 4096 + 8192 + 64);

  const auto s = ask<remote_snapshot>(snapshot_atom_v, operator_);
  EXPECT_EQ(s.generation, 1u);
  EXPECT_EQ(s.backend, "host");
  EXPECT_EQ(s.stats.live_regions, 3u);
  EXPECT_EQ(s.stats.live_bytes, baseline_ + 4096 + 8192 + 64);
  ASSERT_EQ(s.regions.size(), 3u);  // sorted by id: weights, kv, local (scratch was released)
  EXPECT_EQ(s.regions[0].info.id, mine.id);
  EXPECT_EQ(s.regions[0].info.label, "weights");
  EXPECT_EQ(s.regions[0].session, session_.id);
  EXPECT_EQ(s.regions[0].advice, "read_mostly");
  EXPECT_TRUE(s.regions[0].has_last_prefetch);
  EXPECT_EQ(s.regions[0].last_prefetch, location::host());
  EXPECT_EQ(s.regions[1].info.id, theirs.id);
  EXPECT_EQ(s.regions[1].info.bytes, 8192u);
  EXPECT_EQ(s.regions[1].info.attach, attach_flag::host);
  EXPECT_EQ(s.regions[1].session, other.id);
  EXPECT_FALSE(s.regions[1].has_last_prefetch);
  EXPECT_EQ(s.regions[2].info.label, "local");
  EXPECT_EQ(s.regions[2].session, 0u);  // not a lease of any session
  EXPECT_EQ(events_of(s, mine.id, 1),
            (std::vector<std::string>{"allocate weights", "prefetch weights", "advise weights"}));
  EXPECT_EQ(events_of(s, theirs.id, 1), (std::vector<std::string>{"allocate kv"}));
  EXPECT_EQ(events_of(s, gone.id, 1),
            (std::vector<std::string>{"allocate scratch", "release scratch"}));
  EXPECT_FALSE(detail::check_snapshot(s));
  caf::anon_send_exit(other_peer, caf::exit_reason::user_shutdown);
}

TEST_F(gateway, ASnapshotWithoutTheOperatorKeyIsRefusedAndNothingChanges) {
  const auto h = allocate(4096, "mine");
  const auto before = local().flush();
  for (const auto& wrong : {operator_key{}, operator_key{1, 2},
                            operator_key{operator_.secret_hi, operator_.secret_lo ^ 1}})
    UMA_EXPECT_ERROR(ask<remote_snapshot>(snapshot_atom_v, wrong), errc::invalid_argument,
                     "snapshot needs the serving node's operator key");
  const auto after = local().flush();
  EXPECT_EQ(after.live_bytes, before.live_bytes);
  EXPECT_EQ(after.allocations, before.allocations);
  const auto gs = ask<remote_stats>(stats_atom_v);
  EXPECT_EQ(gs.sessions, 1u);
  EXPECT_EQ(gs.leases, 1u);
  EXPECT_EQ(prefetch(h).ranges, 1u);  // the session and its lease still work
}

TEST_F(gateway, ASnapshotOfAStoppedAllocatorSaysSo) {
  const auto h = allocate(4096);
  // Hear the supervisor stop (its restart event) instead of polling its state.
  caf::scoped_actor observer{sys_};
  std::uint64_t subscribed = 0;
  observer->request(sup_, 10s, subscribe_atom_v, caf::actor_cast<restart_observer_actor>(observer))
      .receive([&](std::uint64_t generation) { subscribed = generation; }, [](caf::error&) {});
  ASSERT_EQ(subscribed, 1u);
  faults_->inject({backend_op::advise, 1, errc::unrecoverable});
  UMA_EXPECT_ERRC(ask<remote_op_result>(advise_atom_v, session_,
                                        remote_advise_request{{h}, advice::set_read_mostly}),
                  errc::unrecoverable);
  std::optional<restart_event> event;
  observer->receive([&](restarted_atom, const restart_event& e) { event = e; },
                    caf::after(10s) >> [] {});
  ASSERT_TRUE(event.has_value()) << "no restart event within 10 s";
  EXPECT_EQ(event->cause, restart_cause::stopped);
  ASSERT_EQ(query_supervision(sys_, sup_).state, supervisor_state::stopped);
  UMA_EXPECT_ERRC(ask<remote_snapshot>(snapshot_atom_v, operator_), errc::allocator_stopped);
}

TEST_F(gateway, ATenantCannotSetTheQuotaAndNoRequestLiftsTheCeiling) {
  const auto initial = ask<std::uint64_t>(quota_atom_v, std::uint64_t{0});
  static_cast<void>(allocate(4096));
  const auto live = local().flush().live_bytes;
  for (const std::uint64_t q : {UINT64_MAX, live})
    UMA_EXPECT_ERROR(ask<std::uint64_t>(quota_atom_v, q), errc::invalid_argument,
                     "quota: setting the quota to " + std::to_string(q) +
                         " bytes needs the serving node's operator key");
  UMA_EXPECT_ERROR(ask<std::uint64_t>(set_quota_atom_v, operator_key{}, live),
                   errc::invalid_argument, "needs the serving node's operator key");
  UMA_EXPECT_ERROR(ask<std::uint64_t>(set_quota_atom_v, operator_, UINT64_MAX),
                   errc::invalid_argument,
                   "quota: 18446744073709551615 bytes is above the ceiling of " +
                       std::to_string(initial) + " bytes the serving node was started with");
  EXPECT_EQ(local().stats().quota_bytes, initial);
}

TEST_F(gateway, TheOperatorRestartsTheAllocatorAndOldLeasesGoStale) {
  const auto old = allocate(4096);
  EXPECT_EQ(ask<std::uint64_t>(restart_atom_v, operator_), 2u);
  await_generation(2);
  EXPECT_EQ(query_supervision(sys_, sup_).requested_restarts, 1u);
  UMA_EXPECT_ERROR(prefetch(old), errc::allocator_stopped, "region 1 of generation 1 is stale");
  EXPECT_EQ(allocate(4096), (region_handle{1, 2}));
  EXPECT_EQ(ask<std::uint64_t>(restart_atom_v, operator_), 3u);
}

TEST_F(gateway, ATenantCannotRestartTheAllocatorAndNothingChanges) {
  const auto h = allocate(4096);
  UMA_EXPECT_ERROR(ask<std::uint64_t>(restart_atom_v, operator_key{1, 2}), errc::invalid_argument,
                   "restart needs the serving node's operator key");
  const auto s = query_supervision(sys_, sup_);
  EXPECT_EQ(s.current_generation, 1u);
  EXPECT_EQ(s.requested_restarts, 0u);
  EXPECT_EQ(prefetch(h).ranges, 1u);  // the lease still works
}

TEST_F(gateway, ASessionNamingTheGatewayOrItsSupervisorOrNoSenderIsRefused) {
  UMA_EXPECT_ERROR(ask<session_key>(open_session_atom_v, caf::actor_cast<caf::actor>(gw_)),
                   errc::invalid_argument, "the actor given is the serving node's own gateway");
  UMA_EXPECT_ERROR(ask<session_key>(open_session_atom_v, caf::actor_cast<caf::actor>(sup_)),
                   errc::invalid_argument, "own allocator supervisor");
  EXPECT_EQ(ask<remote_stats>(stats_atom_v).sessions, 1u);
}

TEST_F(gateway, ATenantsSessionsAndBytesAreCapped) {
  gateway_config cfg;
  cfg.tenant_quota_bytes = 10000;
  cfg.max_sessions_per_tenant = 2;
  start_gateway(cfg);
  static_cast<void>(allocate(4096, "0123456789"));  // 4106 bytes charged
  UMA_EXPECT_ERROR(allocate(8192, std::string(200, 'x')), errc::quota_exceeded,
                   "holds 4106 bytes; 8392 more (region, alignment padding and label) would "
                   "exceed the tenant quota of 10000 bytes");
  auto second = sys_.spawn(idle_peer, 0);
  static_cast<void>(ask<session_key>(open_session_atom_v, second));
  auto third = sys_.spawn(idle_peer, 0);
  UMA_EXPECT_ERROR(ask<session_key>(open_session_atom_v, third), errc::quota_exceeded,
                   "has 2 sessions open, the cap per tenant");
  for (auto& a : {second, third})
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

// Issue 35, finding 3: 64-byte leases asked with alignments of gigabytes were charged 64 bytes
// each and held the whole quota. A request is admitted by the most it may hold (its alignment
// padding included) and its lease charged what its region holds (host backend: page-aligned
// memory, so an alignment of A pads by A - 4096).
TEST_F(gateway, ATenantIsChargedTheAlignmentPaddingItsRegionsHold) {
  gateway_config cfg;
  cfg.tenant_quota_bytes = 200 << 10;
  start_gateway(cfg);
  const auto aligned = [&](std::uint64_t alignment) {
    return ask<region_handle>(allocate_atom_v, session_,
                              remote_allocate_request{64, alignment, attach_flag::global, "a"});
  };
  UMA_EXPECT_ERROR(aligned(std::uint64_t{8} << 30), errc::quota_exceeded,
                   "would exceed the tenant quota");
  static_cast<void>(aligned(64 << 10));   // holds 64 + 61440 bytes, label 1
  static_cast<void>(aligned(128 << 10));  // holds 64 + 126976 bytes, label 1
  UMA_EXPECT_ERROR(allocate(16 << 10, "b"), errc::quota_exceeded, "holds 188546 bytes; 16385 more");
}

TEST_F(gateway, LabelsAreCappedAndFreeOfControlCharacters) {
  const auto live = local().flush().live_bytes;
  UMA_EXPECT_ERROR(allocate(48, std::string(8 << 20, 'x')), errc::invalid_argument,
                   "allocate: the label is 8388608 bytes, over the cap of 256 bytes");
  UMA_EXPECT_ERROR(allocate(48, "ok\nregion 9 of generation 1: forged"), errc::invalid_argument,
                   "allocate: the label has a control, format or separator character (U+000A) at "
                   "byte 2");
  UMA_EXPECT_ERROR(allocate(48, "\x1b[31mred"), errc::invalid_argument, "(U+001B) at byte 0");
  // Unicode's C1 controls, bidirectional overrides and line separators forge rows as well as
  // ASCII's controls do; bytes that are no UTF-8 are refused too.
  UMA_EXPECT_ERROR(allocate(48, "a\u009bb"), errc::invalid_argument, "(U+009B) at byte 1");
  UMA_EXPECT_ERROR(allocate(48, "gpt\u202e2"), errc::invalid_argument, "(U+202E) at byte 3");
  UMA_EXPECT_ERROR(allocate(48, "x\u2028y"), errc::invalid_argument, "(U+2028) at byte 1");
  UMA_EXPECT_ERROR(allocate(48, "bad\xff"), errc::invalid_argument,
                   "the label is not UTF-8 at byte 3");
  EXPECT_EQ(local().flush().live_bytes, live);
  EXPECT_EQ(detail::escape_control("a\nb\x1b[0m\\"), "a\\nb\\x1b[0m\\\\");
  EXPECT_EQ(detail::escape_control("r\u202eé\u2028\xff"), "r\\u{202e}é\\u{2028}\\xff");
  const auto label = std::string("weights ") + "\u00e9\u4e2d";  // printable text stays as it is
  static_cast<void>(allocate(48, label));
  EXPECT_GT(local().flush().live_bytes, live);
}

TEST_F(gateway, EnumValuesOutOfRangeAreRefusedBeforeAnythingRuns) {
  const auto h = allocate(4096);
  const auto before = local().flush();
  for (const int flag : {0, 200})
    UMA_EXPECT_ERROR(
        ask<region_handle>(allocate_atom_v, session_,
                           remote_allocate_request{64, 0, static_cast<attach_flag>(flag)}),
        errc::invalid_argument,
        "allocate: attach flag " + std::to_string(flag) + " is out of range");
  for (const int when : {77, 200})
    UMA_EXPECT_ERROR(
        ask<remote_op_result>(
            prefetch_atom_v, session_,
            remote_prefetch_request{{h}, {location::host()}, static_cast<completion>(when)}),
        errc::invalid_argument,
        "prefetch: completion " + std::to_string(when) + " is out of range");
  UMA_EXPECT_ERROR(ask<remote_op_result>(discard_atom_v, session_,
                                         remote_discard_request{{h}, static_cast<completion>(77)}),
                   errc::invalid_argument, "discard: completion 77 is out of range");
  UMA_EXPECT_ERROR(ask<remote_op_result>(advise_atom_v, session_,
                                         remote_advise_request{{h}, static_cast<advice>(0)}),
                   errc::invalid_argument, "advise: advice 0 is out of range");
  const location bogus{static_cast<location::kind>(9), 0};
  UMA_EXPECT_ERROR(
      ask<remote_op_result>(prefetch_atom_v, session_, remote_prefetch_request{{h}, {bogus}}),
      errc::invalid_argument, "prefetch: location 0 has kind 9, out of range");
  const auto after = local().flush();
  EXPECT_EQ(after.live_regions, before.live_regions);
  EXPECT_EQ(after.prefetches, before.prefetches);
  EXPECT_EQ(after.advises, before.advises);
}

TEST_F(gateway, AnAllocationWhoseSizeOverflowsIsRefusedNamingTheOperands) {
  UMA_EXPECT_ERROR(allocate(UINT64_MAX, "x"), errc::overflow,
                   "allocate: bytes + label bytes: 18446744073709551615 + 1 does not fit");
  UMA_EXPECT_ERROR(allocate(UINT64_MAX, ""), errc::quota_exceeded,
                   "allocate: 18446744073709551615 bytes plus a label of 0 bytes exceed the "
                   "serving node's quota ceiling of");
}

// Hole 10, local side: the allocator's quota check prints the wrapped sum ("would bring live
// bytes to 0"). Its message lives in actors/detail/allocation_core.cpp, which is being rewritten
// into memory/limit_resource; enable this test once that message names the operands.
TEST_F(gateway, TheAllocatorsQuotaRefusalNamesTheOperandsWhenTheirSumOverflows) {
  auto held = local().allocate<std::byte>(4096);
  const std::size_t huge = SIZE_MAX - 4095;  // live bytes + huge wraps to 0
  try {
    static_cast<void>(local().allocate<std::byte>(huge));
    FAIL() << "allocated " << huge << " bytes";
  } catch (const error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), errc::quota_exceeded) << what;
    EXPECT_NE(what.find(std::to_string(huge)), std::string::npos) << what;
    EXPECT_NE(what.find(std::to_string(baseline_ + 4096)), std::string::npos) << what;
    EXPECT_EQ(what.find("live bytes to 0,"), std::string::npos) << what;
  }
}

TEST_F(gateway, AnIdleSessionEndsAndItsLeasesAreReleased) {
  gateway_config cfg;
  cfg.idle_timeout = 50ms;
  start_gateway(cfg);
  static_cast<void>(allocate(16384));
  EXPECT_EQ(local().flush().live_bytes, baseline_ + 16384);
  // Every request sweeps idle sessions; poll (bounded) until the timeout has passed. Each try
  // is a request, which is what sweeps: the poll needs no sleep.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  auto s = ask<remote_stats>(stats_atom_v);
  while (s.sessions != 0 && std::chrono::steady_clock::now() < deadline)
    s = ask<remote_stats>(stats_atom_v);
  EXPECT_EQ(s.sessions, 0u);
  EXPECT_EQ(await_live_bytes(baseline_), baseline_);
  UMA_EXPECT_ERROR(allocate(64), errc::invalid_argument, "session 1 is not open");
}

TEST_F(gateway, AnIdleSessionsPeerIsEndedWithIt) {
  // Issue 35, finding 5: a session ended as idle left its peer (on the wire: the holder of the
  // session's stream) alive, so the stream and its connection stayed open and held a slot.
  gateway_config cfg;
  cfg.idle_timeout = 50ms;
  start_gateway(cfg);
  caf::scoped_actor watcher{sys_};
  watcher->monitor(peer_);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  auto s = ask<remote_stats>(stats_atom_v);
  while (s.sessions != 0 && std::chrono::steady_clock::now() < deadline)
    s = ask<remote_stats>(stats_atom_v);
  ASSERT_EQ(s.sessions, 0u);
  bool down = false;
  watcher->receive([&](const caf::down_msg& dm) { down = dm.source == peer_.address(); },
                   caf::after(10s) >> [] {});
  EXPECT_TRUE(down) << "the idle session's peer is still alive";
}

TEST_F(gateway, AForgedDownMessageOrAnAnonymousExitChangesNothing) {
  const auto h = allocate(4096);
  caf::scoped_actor self{sys_};
  // A down message naming the session's actor, but not sent by it; an exit nobody signs.
  self->send(caf::actor_cast<caf::actor>(gw_),
             caf::down_msg{peer_.address(), caf::exit_reason::kill});
  caf::anon_send_exit(gw_, caf::exit_reason::kill);
  EXPECT_EQ(prefetch(h).bytes, 4096u);
  const auto s = ask<remote_stats>(stats_atom_v);
  EXPECT_EQ(s.sessions, 1u);
  EXPECT_EQ(s.sessions_lost, 0u);
  EXPECT_EQ(s.leases, 1u);
}

TEST_F(gateway, LoopbackAddressesAreRecognised) {
  for (const char* a : {"127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"})
    EXPECT_TRUE(is_loopback_address(a)) << a;
  for (const char* a : {"0.0.0.0", "10.0.0.1", "::", "", "example.com", "128.0.0.1", "[::2]"})
    EXPECT_FALSE(is_loopback_address(a)) << a;
}

}  // namespace
}  // namespace uma
