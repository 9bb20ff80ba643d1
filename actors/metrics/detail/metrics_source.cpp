#include <uma/actors/metrics/detail/metrics_source.hpp>

#include <memory>
#include <utility>

#include <caf/event_based_actor.hpp>

#include <uma/messages/error_category.hpp>

namespace uma::detail {

namespace {

/// One fetch in flight: the snapshot so far and where it goes.
struct fetch_state {
  metrics_snapshot snapshot;
  metrics_source::callback done;
  bool labels = false;
};

/// The cached labels when they are younger than the interval.
template <class Cache>
std::optional<std::vector<label_usage>> fresh_labels(Cache& cache) {
  std::lock_guard lock(cache.mutex);
  if (cache.read && std::chrono::steady_clock::now() - *cache.read < cache.interval)
    return cache.labels;
  return std::nullopt;
}

using state_ptr = std::shared_ptr<fetch_state>;

/// The error handler of a request step: ends the fetch naming the step.
auto fail(caf::event_based_actor* self, const state_ptr& st, const char* step) {
  return [self, st, step](const caf::error& e) {
    st->done({.error = std::string(step) + ": " + self->system().render(e)});
  };
}

void ask_supervision(caf::event_based_actor* self, const state_ptr& st,
                     const allocator_supervisor_actor& supervisor,
                     std::chrono::milliseconds timeout) {
  if (!supervisor) {
    st->done({.snapshot = std::move(st->snapshot)});
    return;
  }
  self->request(supervisor, timeout, supervision_atom_v)
      .then(
          [st](supervision_stats& s) {
            st->snapshot.supervision = std::move(s);
            st->done({.snapshot = std::move(st->snapshot)});
          },
          fail(self, st, "supervision"));
}

/// The residency account (kept when the allocator has devices to budget), then supervision.
void ask_residency(caf::event_based_actor* self, const state_ptr& st,
                   const managed_allocator_actor& allocator,
                   const allocator_supervisor_actor& supervisor,
                   std::chrono::milliseconds timeout) {
  self->request(allocator, timeout, residency_atom_v)
      .then(
          [=](residency_report& r) {
            if (!r.devices.empty())
              st->snapshot.residency = std::move(r);
            ask_supervision(self, st, supervisor, timeout);
          },
          fail(self, st, "residency"));
}

}  // namespace

metrics_source::metrics_source(caf::actor_system& sys, managed_allocator_actor allocator,
                               allocator_supervisor_actor supervisor,
                               std::chrono::milliseconds timeout, bool labels,
                               std::chrono::milliseconds labels_interval)
    : sys_(sys),
      allocator_(std::move(allocator)),
      supervisor_(std::move(supervisor)),
      timeout_(timeout),
      labels_(labels),
      cache_(std::make_shared<labels_cache>()) {
  cache_->interval = labels_interval;
}

void metrics_source::fetch(callback done) const {
  auto st = std::make_shared<fetch_state>();
  st->done = std::move(done);
  st->labels = labels_;
  if (labels_)
    if (auto cached = fresh_labels(*cache_)) {
      st->snapshot.labels = std::move(cached);
      st->labels = false;  // served from the cache: no region report this time
    }
  // Everything goes in as spawn arguments, not captures: CAF 0.17 dereferences a null argument
  // tuple when a function actor is spawned with none (UBSan stops on it).
  sys_.spawn(
      [](caf::event_based_actor* self, state_ptr st, managed_allocator_actor allocator,
         allocator_supervisor_actor supervisor, std::chrono::milliseconds timeout,
         std::shared_ptr<labels_cache> cache) {
        self->request(allocator, timeout, stats_atom_v)
            .then(
                [=](allocator_stats& s) {
                  st->snapshot.allocator = std::move(s);
                  if (!st->labels) {
                    ask_residency(self, st, allocator, supervisor, timeout);
                    return;
                  }
                  self->request(allocator, timeout, regions_atom_v)
                      .then(
                          [=](const std::vector<region_info>& regions) {
                            st->snapshot.labels = usage_by_label(regions);
                            {
                              std::lock_guard lock(cache->mutex);
                              cache->labels = *st->snapshot.labels;
                              cache->read = std::chrono::steady_clock::now();
                            }
                            ask_residency(self, st, allocator, supervisor, timeout);
                          },
                          fail(self, st, "regions"));
                },
                fail(self, st, "stats"));
      },
      st, allocator_, supervisor_, timeout_, cache_);
}

void metrics_source::probe(callback done) const {
  auto st = std::make_shared<fetch_state>();
  st->done = std::move(done);
  sys_.spawn(
      [](caf::event_based_actor* self, state_ptr st, managed_allocator_actor allocator,
         allocator_supervisor_actor supervisor, std::chrono::milliseconds timeout) {
        auto ask_stats = [=] {
          self->request(allocator, timeout, stats_atom_v)
              .then(
                  [st](allocator_stats& s) {
                    st->done({.snapshot = metrics_snapshot{.allocator = s}});
                  },
                  fail(self, st, "stats"));
        };
        if (!supervisor) {
          ask_stats();
          return;
        }
        self->request(supervisor, timeout, supervision_atom_v)
            .then(
                [=](const supervision_stats& s) {
                  if (s.state != supervisor_state::running)
                    st->done(
                        {.error =
                             "the allocator supervisor is " + std::string(to_string(s.state)) +
                             (s.last_exit_reason.empty() ? "" : " (" + s.last_exit_reason + ")")});
                  else
                    ask_stats();
                },
                fail(self, st, "supervision"));
      },
      st, allocator_, supervisor_, timeout_);
}

void metrics_source::snapshot(std::function<void(snapshot_outcome)> done) const {
  sys_.spawn(
      [](caf::event_based_actor* self, std::function<void(snapshot_outcome)> done,
         managed_allocator_actor allocator, std::chrono::milliseconds timeout) {
        self->request(allocator, timeout, snapshot_atom_v)
            .then([done](allocator_snapshot& s) { done({.snapshot = std::move(s)}); },
                  [self, done](const caf::error& e) {
                    const bool stopped = to_uma_error(e).code() == errc::allocator_stopped;
                    done({.error = self->system().render(e), .stopped = stopped});
                  });
      },
      std::move(done), allocator_, timeout_);
}

}  // namespace uma::detail
