#include <uma/sys/fault_injecting_backend.hpp>

#include <charconv>

namespace uma {

namespace {

constexpr std::array<std::string_view, backend_op_count> op_names = {
    "allocate",   "free",    "prefetch",     "discard",          "discard_prefetch", "advise",
    "attributes", "kind_of", "is_capturing", "launch_host_func", "synchronize",      "copy"};

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  for (std::size_t pos = 0;;) {
    const auto next = text.find(sep, pos);
    parts.push_back(text.substr(pos, next == std::string_view::npos ? next : next - pos));
    if (next == std::string_view::npos)
      return parts;
    pos = next + 1;
  }
}

}  // namespace

std::string_view to_string(backend_op op) noexcept {
  const auto i = static_cast<std::size_t>(op);
  return i < op_names.size() ? op_names[i] : "unknown_op";
}

fault parse_fault(std::string_view spec) {
  const auto bad = [&](const std::string& why) -> fault {
    raise(errc::invalid_argument, "fault '" + std::string(spec) + "': " + why +
                                      " (expected OP:N:CODE[:every][:fatal], e.g. "
                                      "prefetch:3:context_lost)");
  };
  const auto parts = split(spec, ':');
  if (parts.size() < 3)
    return bad("too few fields");
  fault f;
  bool op_found = false;
  for (std::size_t i = 0; i < op_names.size(); ++i)
    if (parts[0] == op_names[i]) {
      f.op = static_cast<backend_op>(i);
      op_found = true;
    }
  if (!op_found)
    return bad("unknown operation '" + std::string(parts[0]) + "'");
  const auto* first = parts[1].data();
  const auto* last = first + parts[1].size();
  if (auto [end, ec] = std::from_chars(first, last, f.nth);
      ec != std::errc{} || end != last || f.nth == 0)
    return bad("N must be a positive integer, not '" + std::string(parts[1]) + "'");
  bool code_found = false;
  for (std::size_t i = 1; i < errc_slots; ++i)
    if (parts[2] == to_string(static_cast<errc>(i))) {
      f.code = static_cast<errc>(i);
      code_found = true;
    }
  if (!code_found)
    return bad("unknown error code '" + std::string(parts[2]) + "'");
  for (std::size_t i = 3; i < parts.size(); ++i) {
    if (parts[i] == "every")
      f.every = true;
    else if (parts[i] == "fatal")
      f.fatal = true;
    else
      return bad("unknown flag '" + std::string(parts[i]) + "'");
  }
  return f;
}

fault_injecting_backend::fault_injecting_backend(std::shared_ptr<backend> inner)
    : inner_(std::move(inner)) {}

void fault_injecting_backend::inject(fault f) {
  std::lock_guard lock(mutex_);
  faults_.push_back({f, calls_[static_cast<std::size_t>(f.op)]});
}

void fault_injecting_backend::clear() {
  std::lock_guard lock(mutex_);
  faults_.clear();
}

std::uint64_t fault_injecting_backend::calls(backend_op op) const noexcept {
  std::lock_guard lock(mutex_);
  return calls_[static_cast<std::size_t>(op)];
}

std::string fault_injecting_backend::description() const {
  return inner_->description() + " [fault injection]";
}

std::optional<fault> fault_injecting_backend::tick(backend_op op) {
  std::lock_guard lock(mutex_);
  const auto n = ++calls_[static_cast<std::size_t>(op)];
  for (auto& a : faults_) {
    if (a.spent || a.spec.op != op)
      continue;
    const auto since = n - a.start;
    if (a.spec.every ? since % a.spec.nth == 0 : since == a.spec.nth) {
      a.spent = !a.spec.every;
      injected_.fetch_add(1);
      return a.spec;
    }
  }
  return std::nullopt;
}

void fault_injecting_backend::hold(backend_op op) {
  std::lock_guard lock(hold_mutex_);
  holding_ = op;
}

bool fault_injecting_backend::wait_for_held(std::chrono::milliseconds timeout) {
  std::unique_lock lock(hold_mutex_);
  return hold_changed_.wait_for(lock, timeout, [this] { return held_ > 0; });
}

void fault_injecting_backend::resume() {
  std::lock_guard lock(hold_mutex_);
  holding_.reset();
  hold_changed_.notify_all();
}

void fault_injecting_backend::wait_while_held(backend_op op) {
  std::unique_lock lock(hold_mutex_);
  if (holding_ == op) {
    ++held_;
    hold_changed_.notify_all();
    hold_changed_.wait(lock, [this, op] { return holding_ != op; });
    --held_;
  }
}

void fault_injecting_backend::maybe_fail(backend_op op) {
  wait_while_held(op);
  const auto f = tick(op);
  if (!f)
    return;
  const auto message = "injected fault: " + std::string(to_string(op)) + " call failed with " +
                       std::string(to_string(f->code));
  if (f->fatal)
    throw fatal_error(f->code, message);
  throw error(f->code, message);
}

void* fault_injecting_backend::allocate_managed(std::size_t bytes, attach_flag attach) {
  maybe_fail(backend_op::allocate);
  return inner_->allocate_managed(bytes, attach);
}

void fault_injecting_backend::free_managed(void* ptr, std::size_t bytes) noexcept {
  try {
    wait_while_held(backend_op::free);
    if (tick(backend_op::free))
      failed_frees_.fetch_add(1);
  } catch (...) {
  }
  inner_->free_managed(ptr, bytes);  // a failed free still gives the memory back: no leak
}

void* fault_injecting_backend::allocate_tier(memory_kind kind, std::size_t bytes, int device) {
  maybe_fail(backend_op::allocate);
  return inner_->allocate_tier(kind, bytes, device);
}

void fault_injecting_backend::free_tier(memory_kind kind, void* ptr, std::size_t bytes,
                                        int device) noexcept {
  try {
    wait_while_held(backend_op::free);
    if (tick(backend_op::free))
      failed_frees_.fetch_add(1);
  } catch (...) {
  }
  inner_->free_tier(kind, ptr, bytes, device);  // as free_managed: the memory goes back
}

void fault_injecting_backend::copy(void* dst, const void* src, std::size_t bytes,
                                   stream_view stream) {
  maybe_fail(backend_op::copy);
  inner_->copy(dst, src, bytes, stream);
}

void fault_injecting_backend::prefetch(std::span<const byte_range> ranges,
                                       std::span<const location> locations, stream_view stream) {
  maybe_fail(backend_op::prefetch);
  inner_->prefetch(ranges, locations, stream);
}

void fault_injecting_backend::discard(std::span<const byte_range> ranges, stream_view stream) {
  maybe_fail(backend_op::discard);
  inner_->discard(ranges, stream);
}

void fault_injecting_backend::discard_prefetch(std::span<const byte_range> ranges,
                                               std::span<const location> locations,
                                               stream_view stream) {
  maybe_fail(backend_op::discard_prefetch);
  inner_->discard_prefetch(ranges, locations, stream);
}

void fault_injecting_backend::advise(byte_range range, advice a, location loc) {
  maybe_fail(backend_op::advise);
  inner_->advise(range, a, loc);
}

range_attributes fault_injecting_backend::attributes(byte_range range) {
  maybe_fail(backend_op::attributes);
  return inner_->attributes(range);
}

memory_kind fault_injecting_backend::kind_of(const void* ptr) {
  maybe_fail(backend_op::kind_of);
  return inner_->kind_of(ptr);
}

bool fault_injecting_backend::is_capturing(stream_view stream) {
  maybe_fail(backend_op::is_capturing);
  return inner_->is_capturing(stream);
}

void fault_injecting_backend::launch_host_func(stream_view stream, void (*fn)(void*), void* arg) {
  maybe_fail(backend_op::launch_host_func);
  inner_->launch_host_func(stream, fn, arg);
  std::function<void()> after;
  {
    std::lock_guard lock(mutex_);
    after = after_host_func_;
  }
  if (after)
    after();
}

void fault_injecting_backend::after_host_func(std::function<void()> after) {
  std::lock_guard lock(mutex_);
  after_host_func_ = std::move(after);
}

void fault_injecting_backend::wait_stream(stream_view stream) {
  maybe_fail(backend_op::launch_host_func);
  inner_->wait_stream(stream);
}

void fault_injecting_backend::synchronize() {
  maybe_fail(backend_op::synchronize);
  inner_->synchronize();
}

backend_counters fault_injecting_backend::counters() const noexcept {
  auto c = inner_->counters();
  c.bad_frees += failed_frees_.load();
  return c;
}

void fault_injecting_backend::provide_um_counters(std::function<um_counter_source()> make) {
  std::lock_guard lock(mutex_);
  um_counters_ = std::move(make);
}

um_counter_source fault_injecting_backend::subscribe_um_counters() {
  std::function<um_counter_source()> make;
  {
    std::lock_guard lock(mutex_);
    make = um_counters_;
  }
  return make ? make() : inner_->subscribe_um_counters();
}

// -- the fake stream model ----------------------------------------------------------------------

namespace {

std::uint64_t& mark_of(std::vector<std::pair<void*, std::uint64_t>>& marks, void* stream) {
  for (auto& [s, mark] : marks)
    if (s == stream)
      return mark;
  return marks.emplace_back(stream, 0).second;
}

}  // namespace

void fault_injecting_backend::manual_events() {
  std::lock_guard lock(mutex_);
  manual_events_ = true;
}

void fault_injecting_backend::complete_stream(stream_view stream) {
  std::lock_guard lock(mutex_);
  mark_of(completed_marks_, stream.handle) = mark_of(recorded_marks_, stream.handle);
}

std::uint64_t fault_injecting_backend::events_recorded() const {
  std::lock_guard lock(mutex_);
  return events_recorded_;
}

void* fault_injecting_backend::create_event() {
  std::lock_guard lock(mutex_);
  if (!manual_events_)
    return inner_->create_event();
  return new manual_event{};
}

void fault_injecting_backend::record_event(void* event, stream_view stream) {
  std::lock_guard lock(mutex_);
  if (!manual_events_)
    return inner_->record_event(event, stream);
  auto* e = static_cast<manual_event*>(event);
  e->stream = stream.handle;
  e->mark = ++mark_of(recorded_marks_, stream.handle);
  ++events_recorded_;
}

bool fault_injecting_backend::event_done(void* event) {
  std::lock_guard lock(mutex_);
  if (!manual_events_)
    return inner_->event_done(event);
  const auto* e = static_cast<const manual_event*>(event);
  return e->mark == 0 || mark_of(completed_marks_, e->stream) >= e->mark;
}

void fault_injecting_backend::destroy_event(void* event) noexcept {
  std::lock_guard lock(mutex_);
  if (!manual_events_)
    return inner_->destroy_event(event);
  delete static_cast<manual_event*>(event);
}

}  // namespace uma
