#include <uma/sys/worker_lanes.hpp>

#include <atomic>

namespace uma {

worker_lanes::worker_lanes(std::function<void()> on_start) : on_start_(std::move(on_start)) {
  lanes_.push_back(std::make_unique<work_queue>(on_start_));
}

std::size_t worker_lanes::for_destinations(std::span<const location> destinations) {
  if (destinations.empty())
    return general;
  const auto lane_of = [](const location& l) {
    return l.is_device() ? 2 + static_cast<std::size_t>(l.id) : std::size_t{1};
  };
  const auto lane = lane_of(destinations.front());
  for (const auto& d : destinations)
    if (lane_of(d) != lane)
      return general;
  return lane;
}

std::size_t worker_lanes::begin_stream(std::size_t preferred, stream_view stream) {
  auto& use = streams_[stream.handle];
  if (use.unfinished == 0)
    use.lane = preferred;
  ++use.unfinished;
  return use.lane;
}

void worker_lanes::finish_stream(stream_view stream) noexcept {
  auto it = streams_.find(stream.handle);
  if (it != streams_.end() && --it->second.unfinished == 0)
    streams_.erase(it);
}

void worker_lanes::post(std::size_t lane, std::function<void()> job) {
  if (lane >= lanes_.size())
    lanes_.resize(lane + 1);
  if (!lanes_[lane])
    lanes_[lane] = std::make_unique<work_queue>(on_start_);
  lanes_[lane]->post(std::move(job));
}

void worker_lanes::barrier(std::function<void()> done) {
  struct countdown {
    std::atomic<std::size_t> left;
    std::function<void()> done;
  };
  auto c = std::make_shared<countdown>();
  c->left = started();
  c->done = std::move(done);
  for (auto& l : lanes_)
    if (l)
      l->post(
          [c] {
            if (c->left.fetch_sub(1, std::memory_order_acq_rel) == 1)
              c->done();
          },
          false);
}

std::size_t worker_lanes::pending() const {
  std::size_t n = 0;
  for (const auto& l : lanes_)
    if (l)
      n += l->pending();
  return n;
}

std::size_t worker_lanes::started() const noexcept {
  std::size_t n = 0;
  for (const auto& l : lanes_)
    n += l ? 1 : 0;
  return n;
}

void worker_lanes::drain_and_stop() noexcept {
  for (auto& l : lanes_)
    if (l)
      l->drain_and_stop();
}

}  // namespace uma
