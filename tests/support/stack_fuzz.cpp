#include "tests/support/stack_fuzz.hpp"

#include <bit>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include <uma/memory/resource_stack.hpp>
#include <uma/sys/fault_injecting_backend.hpp>

namespace uma::test {

namespace {

constexpr std::size_t KiB = 1024;

/// Reads the input front to back; past its end every read is 0 and `done()` is true.
class reader {
 public:
  explicit reader(std::span<const std::uint8_t> in) : in_(in) {}
  [[nodiscard]] bool done() const noexcept { return pos_ >= in_.size(); }
  std::uint8_t byte() noexcept { return done() ? 0 : in_[pos_++]; }
  std::uint16_t u16() noexcept {
    const auto lo = byte();
    return static_cast<std::uint16_t>(lo | (byte() << 8));
  }

 private:
  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
};

/// One allocation the harness holds, with the pattern its bytes were filled with.
struct held_allocation {
  allocation a;
  std::string label;
  std::uint8_t pattern = 0;
};

bool malformed(const allocation_request& r) {
  return r.bytes == 0 || !std::has_single_bit(r.alignment);
}

/// The harness's state: the stack under test and what it holds from it.
class stack_harness {
 public:
  stack_harness(const std::shared_ptr<host_backend>& host, reader& in)
      : host_(host),
        faults_(std::make_shared<fault_injecting_backend>(host)),
        before_(host->counters()),
        in_(in) {
    // The first three bytes chose the retired pool stack and its slab and block sizes (one stack
    // serves both policies now); still read, so that the stored corpus keeps its meaning.
    for (int i = 0; i < 3; ++i)
      static_cast<void>(in_.byte());
    // Small enough that every held byte can be written and checked at thousands of inputs a
    // second, large enough for the quota to bite.
    const std::size_t quota = (1 + in_.byte() % 32) * 16 * KiB;
    stack_ = make_resource_stack(faults_, {allocation_policy::direct, quota});
  }

  void run() {
    for (int step = 0; step < 96 && !in_.done(); ++step) {
      const auto op = in_.byte();
      step_ = step;
      try {
        apply(op % 8);
      } catch (const error& e) {
        const auto code = static_cast<std::size_t>(e.code());
        expect(code >= 1 && code < errc_slots, "an error with an invalid code");
      }
      check_invariants();
    }
    finish();
  }

 private:
  /// Throws a violation naming the step when `ok` is false (the message is built only then).
  void expect(bool ok, const char* what) const {
    if (!ok)
      throw stack_fuzz_violation(where().append(what));
  }

  [[nodiscard]] std::string where() const {
    std::string s = "step ";
    s.append(std::to_string(step_)).append(": ");
    return s;
  }

  void apply(std::uint8_t op) {
    switch (op) {
      case 0:
      case 1:
      case 2:  // was try_allocate, which the stack no longer has (no layer caches)
        return allocate();
      case 3:
      case 4:
        return deallocate(in_.byte());
      case 5:
        return set_limit();
      case 6:  // was trim: nothing to give back
        return;
      default:
        return inject();
    }
  }

  allocation_request request() {
    allocation_request r;
    const auto size_class = in_.byte();
    switch (size_class % 4) {
      case 0:
        r.bytes = in_.byte();
        break;  // 0 included: refused
      case 1:
        r.bytes = std::size_t{in_.u16()} % (4 * KiB) + 1;
        break;
      case 2:
        r.bytes = std::size_t{in_.u16()} % (16 * KiB) + 1;
        break;
      default: {
        const auto b = in_.byte();  // past the quota, or past size_t with padding
        r.bytes = b & 1 ? SIZE_MAX - (b >> 1) * KiB : (std::size_t{b} % 16 + 1) * 4 * KiB;
      }
    }
    const auto align = in_.byte();
    r.alignment = align & 0x80 ? std::size_t{align & 0x7fu} : std::size_t{1} << (align % 20);
    const auto label = in_.byte();
    if (label % 3 == 1)
      r.label = "weights";
    else if (label % 3 == 2)
      r.label.assign(label % 48, static_cast<char>('a' + label % 26));
    return r;
  }

  void allocate() {
    const auto r = request();
    allocation a;
    try {
      a = stack_->top().allocate(r);
    } catch (const error& e) {
      if (malformed(r))
        expect(e.code() == errc::invalid_argument,
               "a malformed request was not "
               "refused with invalid_argument");
      const auto c = e.code();
      expect(c == errc::invalid_argument || c == errc::overflow || c == errc::quota_exceeded ||
                 c == errc::out_of_memory || c == errc::backend_error,
             "allocate threw an unexpected code");
      throw;
    }
    expect(!malformed(r), "a malformed request was served");
    hold(a, r);
  }

  void hold(const allocation& a, const allocation_request& r) {
    const auto data = reinterpret_cast<std::uintptr_t>(a.data);
    expect(a.data != nullptr && a.bytes == r.bytes && a.charged >= r.bytes,
           "an allocation of the wrong size");
    expect(data % r.alignment == 0, "an allocation that ignores its alignment");
    if (auto next = by_address_.lower_bound(data); next != by_address_.end())
      expect(data + a.bytes <= next->first, "overlaps the allocation after it");
    if (auto next = by_address_.lower_bound(data); next != by_address_.begin())
      expect(std::prev(next)->first + std::prev(next)->second <= data,
             "overlaps the allocation before it");
    by_address_.emplace(data, a.bytes);
    const auto pattern = static_cast<std::uint8_t>(0x5a ^ held_.size() ^ step_);
    std::memset(a.data, pattern, a.bytes);
    held_.push_back({a, r.label, pattern});
  }

  void deallocate(std::size_t which) {
    if (held_.empty())
      return;
    const auto it = held_.begin() + static_cast<std::ptrdiff_t>(which % held_.size());
    check_pattern(*it);
    by_address_.erase(reinterpret_cast<std::uintptr_t>(it->a.data));
    const auto a = it->a;
    held_.erase(it);
    stack_->top().deallocate(a);
  }

  void check_pattern(const held_allocation& h) const {
    // Every byte equals the first, and the first is the pattern.
    expect(static_cast<std::uint8_t>(h.a.data[0]) == h.pattern &&
               std::memcmp(h.a.data, h.a.data + 1, h.a.bytes - 1) == 0,
           "a held allocation's bytes changed under it");
  }

  void set_limit() {
    auto& limit = stack_->limit();
    const auto held = limit.held();
    const auto choice = in_.byte();
    std::size_t bytes = (std::size_t{in_.u16()} + 1) * 4 * KiB;
    if (choice % 4 == 0)
      bytes = held;
    else if (choice % 4 == 1 && held > 0)
      bytes = held - 1;
    const auto before = limit.limit();
    try {
      limit.set_limit(bytes);
    } catch (const error& e) {
      expect(e.code() == errc::invalid_argument && bytes < held && limit.limit() == before,
             "set_limit refused a limit it should have taken, or changed it");
      return;
    }
    expect(bytes >= held && limit.limit() == bytes, "set_limit took a limit below held");
  }

  void inject() {
    const auto what = in_.byte();
    const auto op = what & 1 ? backend_op::free : backend_op::allocate;
    const auto code = what & 2 ? errc::backend_error : errc::out_of_memory;
    faults_->inject({op, std::uint64_t{1} + (what >> 2) % 3, code});
  }

  void check_invariants() const {
    const auto stats = stack_->statistics().statistics();
    std::uint64_t bytes = 0;
    for (const auto& h : held_)
      bytes += h.a.charged;
    expect(stats.current_bytes == bytes && stats.current_count == held_.size(),
           "statistics disagree with what is held");
    const auto& limit = stack_->limit();
    expect(limit.held() <= limit.limit(), "the limit holds more than it allows");
    expect(limit.held() == bytes, "the limit's held bytes are not the allocations held");
    const auto report = stack_->tracking().outstanding();
    expect(report.size() == held_.size(), "tracking's outstanding count is wrong");
    for (const auto& t : report) {
      const auto it = by_address_.find(reinterpret_cast<std::uintptr_t>(t.data));
      expect(it != by_address_.end() && it->second == t.bytes,
             "tracking reports an allocation not held");
    }
    for (const auto& h : held_)
      expect(stack_->tracking().label_of(h.a.data) == h.label, "a label was lost");
  }

  void finish() {
    step_ = -1;
    while (!held_.empty())
      deallocate(0);
    faults_->clear();
    const auto stats = stack_->statistics().statistics();
    expect(stats.current_bytes == 0 && stats.current_count == 0, "statistics after everything");
    expect(stack_->limit().held() == 0, "the limit still holds bytes after everything");
    expect(stack_->tracking().size() == 0, "tracking still reports allocations");
    const auto after = host_->counters();
    expect(after.allocations - before_.allocations == after.frees - before_.frees,
           "a backend allocation was not freed exactly once");
    expect(after.bad_frees == before_.bad_frees, "a bad free reached the backend");
    expect(after.live_allocations == before_.live_allocations, "backend allocations leaked");
  }

  std::shared_ptr<host_backend> host_;
  std::shared_ptr<fault_injecting_backend> faults_;
  backend_counters before_;
  reader& in_;
  std::shared_ptr<resource_stack> stack_;
  std::vector<held_allocation> held_;
  std::map<std::uintptr_t, std::size_t> by_address_;  // data -> bytes
  int step_ = -1;
};

}  // namespace

void run_stack_fuzz(std::span<const std::uint8_t> input,
                    const std::shared_ptr<host_backend>& host) {
  reader in(input);
  stack_harness harness(host, in);
  harness.run();
}

}  // namespace uma::test
