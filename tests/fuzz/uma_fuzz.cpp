// libFuzzer target: decodes the input into a sequence of requests and handle operations against
// a host-backend allocator (behind a fault injector) and checks uma's invariants after every
// step and at the end of the input:
//   * every refused request is a uma::error with a known code and a message; nothing else is
//     thrown, nothing crashes (ASan/UBSan watch the memory);
//   * the region table, the allocator's stats and the backend agree (regions, bytes), live bytes
//     never pass the quota, refs of the live generation are valid and listed, refs of a stopped
//     one are inert;
//   * no free is bad, and once everything is dropped and the allocator stopped the backend has
//     freed every allocation exactly once;
//   * the block allocator hands out blocks of the asked size, refuses only sizes it does not
//     serve, the quota, or a stopped allocator, and its blocks go inert with their allocator.
//
// Input format: byte 0 holds flags (bit 0: this input may inject fatal faults; pins are then
// off, since a fatal fault with a pin held would leak the region on purpose). Then steps, each
// an opcode byte and its operands (see `step`); a short read yields zeros.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/actors/allocator_config.hpp>
#include <uma/actors/client.hpp>
#include <uma/memory/region_info.hpp>
#include <uma/messages/error_category.hpp>
#include <uma/messages/inspect.hpp>
#include <uma/messages/interface.hpp>
#include <uma/messages/register_types.hpp>
#include <uma/sys/fault_injecting_backend.hpp>
#include <uma/sys/host_backend.hpp>

namespace {

using namespace uma;

[[noreturn]] void violated(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "uma_fuzz: invariant violated: %s %s\n", what, detail.c_str());
  std::abort();
}
#define UMA_FUZZ_CHECK(cond, detail) \
  do {                               \
    if (!(cond))                     \
      violated(#cond, detail);       \
  } while (false)

struct fuzz_config : caf::actor_system_config {
  fuzz_config() {
    register_types(*this);
    // Work sharing wakes a worker through a condition variable; idle work-stealing workers poll
    // with sleeps of up to 10 ms, which would dominate a run of short round trips.
    set("scheduler.policy", caf::atom("sharing"));
    set("scheduler.max-threads", 2);
    set("logger.verbosity", caf::atom("quiet"));
  }
};

/// One actor system for the whole run, never destroyed: CAF 0.17.6 aborts when an actor_system
/// is destroyed during static destruction (see tests/teardown_exit.cpp), and libFuzzer ends the
/// process with exit(). Reachable from here, so LeakSanitizer does not count it.
caf::actor_system& actor_system() {
  static auto* cfg = new fuzz_config;
  static auto* sys = new caf::actor_system{*cfg};
  return *sys;
}

class reader {
 public:
  reader(const std::uint8_t* data, std::size_t size) : p_(data), n_(size) {}
  [[nodiscard]] bool more() const noexcept { return n_ > 0; }
  std::uint8_t u8() noexcept {
    if (n_ == 0)
      return 0;
    --n_;
    return *p_++;
  }
  std::uint64_t u64(int bytes) noexcept {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
      v |= static_cast<std::uint64_t>(u8()) << (8 * i);
    return v;
  }
  /// A size: mostly small, sometimes near the edges of size_t.
  std::size_t size() noexcept {
    switch (u8() % 8) {
      case 0:
        return 0;
      case 1:
        return SIZE_MAX - u8();
      case 2:
        return (SIZE_MAX >> (u8() % 64)) + 1;
      case 3:
        return u64(3);
      default:
        return u8() + 1;
    }
  }
  location loc() noexcept {
    const auto kind = u8();
    const auto id = static_cast<std::int32_t>(static_cast<std::int8_t>(u8()));
    switch (kind % 5) {
      case 0:
        return location::device(id);
      case 1:
        return location::host();
      case 2:
        return location::host_numa(id % 3);
      case 3:
        return location::host_numa_current();
      default:
        return location{static_cast<location::kind>(kind % 7), id};  // also invalid kinds
    }
  }

 private:
  const std::uint8_t* p_;
  std::size_t n_;
};

constexpr std::size_t slots = 6;
constexpr std::size_t max_pins = 4;
constexpr std::size_t quota = std::size_t{4} << 20;

class session {
 public:
  explicit session(bool fatal_faults) : fatal_faults_(fatal_faults) { start(); }

  void step(reader& in) {
    switch (in.u8() % 18) {
      case 0: {  // allocate (raw request: any count, element size, alignment)
        allocate_request r;
        r.count = in.size();
        r.element_size = in.u8() % 2 ? in.size() : std::size_t{1} << (in.u8() % 5);
        const auto a = in.u8();
        r.alignment = a % 4 == 0 ? 0 : (a % 4 == 1 ? std::size_t{1} << (a % 24) : a);
        r.attach = in.u8() % 2 ? attach_flag::global : attach_flag::host;
        r.label = "fuzz";
        auto ref = ask<byte_ref>(allocate_atom_v, std::move(r));
        if (ref)
          slot(in) = std::move(*ref);
        break;
      }
      case 1:  // drop
        slot(in).reset();
        break;
      case 2: {  // clone
        const auto& from = slot(in);
        slot(in) = from;
        break;
      }
      case 3: {  // subview
        const auto& from = slot(in);
        const auto first = in.size(), count = in.size();
        guard_view([&] { slot(in) = from.subview(first, count); });
        break;
      }
      case 4: {  // typed views there and back
        const auto& from = slot(in);
        guard_view([&] {
          auto view = in.u8() % 2 ? from.as<std::uint64_t>().as<std::byte>()
                                  : from.as<std::uint16_t>().subview(0, 1).as<std::byte>();
          slot(in) = std::move(view);
        });
        break;
      }
      case 5: {  // pin, write and read back through it
        const auto& ref = slot(in);
        if (fatal_faults_ || pins_.size() >= max_pins || ref.empty())
          break;
        if (auto pin = ref.try_pin()) {
          UMA_FUZZ_CHECK(ref.generation() == generation_, "pinned an inert ref");
          UMA_FUZZ_CHECK(inner_->is_live(pin->data(), pin->size()), "pin of a dead range");
          if (pin->size() > 0) {
            const auto v = static_cast<std::byte>(in.u8());
            (*pin)[pin->size() - 1] = v;
            UMA_FUZZ_CHECK((*pin)[pin->size() - 1] == v, "pinned memory did not read back");
          }
          pins_.push_back(std::move(*pin));
        } else {
          UMA_FUZZ_CHECK(ref.generation() != generation_ || !alive_, "live ref refused a pin");
        }
        break;
      }
      case 6:  // unpin
        if (!pins_.empty())
          pins_.erase(pins_.begin() + static_cast<std::ptrdiff_t>(in.u8() % pins_.size()));
        break;
      case 7:
      case 8: {  // prefetch / discard_prefetch
        prefetch_request r{
            refs(in), {}, stream(in), in.u8() % 2 ? completion::complete : completion::enqueued};
        for (auto n = in.u8() % 4; n > 0; --n)
          r.locations.push_back(in.loc());
        if (in.u8() % 2)
          (void)ask<op_result>(prefetch_atom_v, std::move(r));
        else
          (void)ask<op_result>(discard_prefetch_atom_v, std::move(r));
        break;
      }
      case 9: {  // discard
        discard_request r{refs(in), stream(in), completion::enqueued};
        (void)ask<op_result>(discard_atom_v, std::move(r));
        break;
      }
      case 10: {  // advise
        advise_request r{refs(in), static_cast<advice>(in.u8() % 7), in.loc()};
        (void)ask<op_result>(advise_atom_v, std::move(r));
        break;
      }
      case 11:  // attributes
        (void)ask<range_attributes>(attributes_atom_v, slot(in));
        break;
      case 12: {  // can_access
        const auto loc = in.loc();
        (void)ask<bool>(can_access_atom_v, loc, slot(in));
        break;
      }
      case 13: {  // kind_of
        const auto& ref = slot(in);
        const auto address = in.u8() % 2 ? reinterpret_cast<std::uintptr_t>(ref.data())
                                         : static_cast<std::uintptr_t>(in.u64(8));
        (void)ask<memory_kind>(memory_kind_atom_v, address);
        break;
      }
      case 14: {  // arm a fault
        fault f;
        f.op = static_cast<backend_op>(in.u8() % backend_op_count);
        f.nth = 1 + in.u8() % 4;
        const errc codes[] = {errc::out_of_memory, errc::backend_error, errc::not_supported,
                              errc::context_lost, errc::unrecoverable};
        f.code = codes[in.u8() % (fatal_faults_ ? 5 : 3)];
        f.every = in.u8() % 4 == 0;
        f.fatal = fatal_faults_ && in.u8() % 2;
        faults_->inject(f);
        break;
      }
      case 16: {  // the allocator's block allocator (the raw request), replacing the one held
        if (auto b = ask<block_allocator_ref>(blocks_atom_v))
          blocks_ = std::move(*b);
        break;
      }
      case 17: {  // a block (any size, any stream token), into a slot
        const auto bytes = in.size();
        if (!blocks_)
          break;
        try {
          auto b = blocks_->allocate(bytes, 0, stream_view{reinterpret_cast<void*>(in.u8() % 3)});
          UMA_FUZZ_CHECK(b.size() == bytes && blocks_->serves(bytes), "block size");
          slot(in) = std::move(b);
        } catch (const error& e) {
          // A size it does not serve, or a slab refused (quota, an injected backend fault, a
          // stopped allocator): the same refusals as the message path's.
          UMA_FUZZ_CHECK(e.code() != errc::overflow &&
                             (e.code() != errc::invalid_argument || !blocks_->serves(bytes)),
                         e.what());
        }
        break;
      }
      default:  // stop this incarnation and start the next
        restart();
        break;
    }
    check();
  }

  /// Everything dropped and stopped: every allocation was freed exactly once.
  void finish() {
    pins_.clear();
    blocks_.reset();
    for (auto& r : slots_)
      r.reset();
    client_->stop();
    const auto c = inner_->counters();
    UMA_FUZZ_CHECK(c.bad_frees == 0, std::to_string(c.bad_frees));
    UMA_FUZZ_CHECK(c.frees == c.allocations, std::to_string(c.allocations) + " allocations, " +
                                                 std::to_string(c.frees) + " frees");
    UMA_FUZZ_CHECK(c.live_bytes == 0, std::to_string(c.live_bytes));
  }

 private:
  void start() {
    allocator_config cfg;
    cfg.backend.instance = faults_;
    cfg.memory.quota_bytes = quota;
    cfg.supervision.drain_timeout = std::chrono::milliseconds(100);
    cfg.supervision.generation = ++generation_;
    client_.emplace(actor_system(), cfg);
    alive_ = true;
  }

  void restart() {
    pins_.clear();
    faults_->clear();
    client_->stop();
    client_.reset();
    for (const auto& r : slots_)
      UMA_FUZZ_CHECK(r.empty() || !r.valid(), "a ref survived its allocator's stop");
    if (blocks_)
      UMA_FUZZ_CHECK(!blocks_->serves(1) || blocks_->stats().slabs == 0,
                     "a block allocator kept slabs past its allocator's stop");
    start();
  }

  byte_ref& slot(reader& in) { return slots_[in.u8() % slots]; }

  std::vector<byte_ref> refs(reader& in) {
    std::vector<byte_ref> out;
    const auto mask = in.u8();
    for (std::size_t i = 0; i < slots; ++i)
      if (mask & (1u << i))
        out.push_back(slots_[i]);
    if (mask & 0x80 && !out.empty())
      out.push_back(out.front());  // a duplicate
    return out;
  }

  static stream_view stream(reader& in) {
    return {in.u8() % 8 == 0 ? reinterpret_cast<void*>(std::uintptr_t{0x1000}) : nullptr};
  }

  template <class F>
  static void guard_view(F&& f) {
    try {
      f();
    } catch (const error& e) {
      UMA_FUZZ_CHECK(e.code() == errc::invalid_argument, e.what());
    }
  }

  /// Sends a request; a uma error reply must carry a known code and a message.
  template <class R, class... Ts>
  std::optional<R> ask(Ts&&... xs) {
    try {
      std::optional<R> out;
      caf::error err;
      self_->request(client_->handle(), std::chrono::seconds(30), std::forward<Ts>(xs)...)
          .receive([&](R& r) { out = std::move(r); }, [&](caf::error& e) { err = std::move(e); });
      if (err)
        throw to_uma_error(err);
      return out;
    } catch (const error& e) {
      const auto code = static_cast<std::size_t>(e.code());
      UMA_FUZZ_CHECK(code > 0 && code < errc_slots, e.what());
      UMA_FUZZ_CHECK(std::string(e.what()).size() > 10, e.what());
      last_error_ = e.code();
      return std::nullopt;
    }
  }

  /// The table, the stats and the backend agree; refs are valid exactly while their generation
  /// lives.
  void check() {
    const auto c0 = inner_->counters();
    UMA_FUZZ_CHECK(c0.bad_frees == 0, "a free was bad");
    const auto s = ask<allocator_stats>(flush_atom_v);
    const auto table = ask<std::vector<region_info>>(regions_atom_v);
    if (!s || !table) {
      UMA_FUZZ_CHECK(last_error_ == errc::allocator_stopped, std::string(to_string(last_error_)));
      alive_ = false;  // a fatal fault ended this incarnation: requests get allocator_stopped
      return;
    }
    const auto c = inner_->counters();
    UMA_FUZZ_CHECK(s->live_regions == table->size(), "stats and region table disagree");
    UMA_FUZZ_CHECK(c.live_allocations == s->live_regions, "backend and stats disagree");
    UMA_FUZZ_CHECK(c.live_bytes == s->live_bytes, "backend and stats disagree on bytes");
    UMA_FUZZ_CHECK(s->live_bytes <= quota, "live bytes past the quota");
    for (const auto& r : slots_) {
      if (r.empty())
        continue;
      if (r.generation() == generation_) {
        UMA_FUZZ_CHECK(r.valid(), "a ref of the live generation is not valid");
        bool listed = false;
        for (const auto& row : *table)  // a block is listed as its slab
          listed = listed || row.id == detail::record_of(r)->home->id;
        UMA_FUZZ_CHECK(listed, "a held region is missing from the table");
      } else {
        UMA_FUZZ_CHECK(!r.valid() && r.data() == nullptr, "a ref of a stopped generation is valid");
      }
    }
  }

  bool fatal_faults_;
  caf::scoped_actor self_{actor_system()};
  std::shared_ptr<host_backend> inner_ = std::make_shared<host_backend>(16);
  std::shared_ptr<fault_injecting_backend> faults_ =
      std::make_shared<fault_injecting_backend>(inner_);
  std::optional<client> client_;
  std::uint64_t generation_ = 0;
  bool alive_ = false;
  errc last_error_{};
  std::vector<byte_ref> slots_ = std::vector<byte_ref>(slots);
  std::vector<Pin<std::byte>> pins_;
  block_allocator_ref blocks_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  reader in(data, size);
  session s(in.u8() & 1);
  for (int steps = 0; in.more() && steps < 48; ++steps)
    s.step(in);
  s.finish();
  return 0;
}
