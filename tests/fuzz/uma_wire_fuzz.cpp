// libFuzzer target for what a remote peer puts on the wire (docs/reliability.md, "Fuzzing"):
// the first byte picks one of the remote interface's registered types (or a whole
// `caf::message`, as the middleman reads a BASP payload), the rest is fed to CAF 0.17's
// `binary_deserializer`. Every value that decodes goes through the gateway's own checks
// (actors/detail/remote_checks.hpp; for a snapshot, what a server sends, the client's), and
//   * a value the checks accept has every enum in range and a label under the cap;
//   * a value that decodes serializes and decodes again to an equal value.
// A crash, a sanitizer report, an unbounded allocation or a failed check is a finding.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/message.hpp>

#include <uma/actors/detail/remote_checks.hpp>
#include <uma/messages/register_types.hpp>
#include <uma/messages/remote_interface.hpp>

namespace {

struct wire_config : caf::actor_system_config {
  wire_config() { uma::register_types(*this); }
};

/// Never destroyed: CAF 0.17 aborts when an actor system goes during static destruction.
caf::actor_system& sys() {
  static auto* cfg = new wire_config;
  static auto* s = new caf::actor_system{*cfg};
  return *s;
}

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "uma_wire_fuzz: %s\n", what);
    std::abort();
  }
}

bool in_range(uma::location l) {
  const auto k = static_cast<unsigned>(l.type);
  return k >= 1 && k <= 4;
}

template <class T>
T serializable(T x) {
  return x;
}

/// CAF 0.17's pack754 never returns for an infinite double, flushes a subnormal to 0, and a NaN
/// equals nothing: a snapshot's `stats.fragmentation` (a ratio in [0, 1] the serving node
/// computes, none of these) is made 0 before the round trip unless it is normal or zero.
uma::remote_snapshot serializable(uma::remote_snapshot x) {
  const auto kind = std::fpclassify(x.stats.fragmentation);
  if (kind != FP_NORMAL && kind != FP_ZERO)
    x.stats.fragmentation = 0;
  return x;
}

template <class T>
void round_trip(T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys(), buf};
  require(!sink(x), "a decoded value does not serialize");
  T y{};
  caf::binary_deserializer source{sys(), buf};
  require(!source(y), "a serialized value does not decode");
  require(x == y, "a round trip changed the value");
}

/// Decodes a `T` from `data`; nothing else happens when it does not decode.
template <class T, class Check>
void decode(const std::uint8_t* data, std::size_t size, Check check) {
  T x{};
  caf::binary_deserializer source{sys(), reinterpret_cast<const char*>(data), size};
  if (source(x))
    return;
  check(x);
  round_trip(serializable(std::move(x)));
}

void check_allocate(const uma::remote_allocate_request& r) {
  if (!uma::detail::check_allocate(r, 256)) {
    require(r.attach == uma::attach_flag::global || r.attach == uma::attach_flag::host,
            "an accepted attach flag is out of range");
    require(r.label.size() <= 256, "an accepted label is over the cap");
    for (const char c : r.label)
      require(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f,
              "an accepted label has a control character");
  }
}

void check_prefetch(const uma::remote_prefetch_request& r) {
  const bool ok = !uma::detail::check_completion("prefetch", r.reply_when) &&
                  !uma::detail::check_locations("prefetch", r.locations);
  if (ok) {
    require(static_cast<unsigned>(r.reply_when) <= 1, "an accepted completion is out of range");
    for (const auto& l : r.locations)
      require(in_range(l), "an accepted location kind is out of range");
  }
}

void check_advise(const uma::remote_advise_request& r) {
  if (!uma::detail::check_advise(r)) {
    const auto a = static_cast<unsigned>(r.what);
    require(a >= 1 && a <= 6, "accepted advice is out of range");
    require(in_range(r.where), "an accepted advice location is out of range");
  }
}

/// What `uma snapshot --connect` renders: a snapshot the client's check accepts has every enum
/// in range.
void check_snapshot(const uma::remote_snapshot& s) {
  if (uma::detail::check_snapshot(s))
    return;
  for (const auto& r : s.regions) {
    require(static_cast<unsigned>(r.policy) <= 2, "an accepted region policy is out of range");
    require(r.info.attach == uma::attach_flag::global || r.info.attach == uma::attach_flag::host,
            "an accepted snapshot attach flag is out of range");
    require(!r.has_last_prefetch || in_range(r.last_prefetch),
            "an accepted last prefetch location is out of range");
  }
  for (const auto& e : s.events)
    require(static_cast<unsigned>(e.kind) <= 6, "an accepted event kind is out of range");
}

void check_message(const std::uint8_t* data, std::size_t size) {
  caf::message msg;
  caf::binary_deserializer source{sys(), reinterpret_cast<const char*>(data), size};
  if (source(msg))
    return;
  if (msg.match_elements<uma::allocate_atom, uma::session_key, uma::remote_allocate_request>())
    check_allocate(msg.get_as<uma::remote_allocate_request>(2));
  if (msg.match_elements<uma::prefetch_atom, uma::session_key, uma::remote_prefetch_request>())
    check_prefetch(msg.get_as<uma::remote_prefetch_request>(2));
  if (msg.match_elements<uma::advise_atom, uma::session_key, uma::remote_advise_request>())
    check_advise(msg.get_as<uma::remote_advise_request>(2));
  // An access plan's enums arrive as they are; the gateway checks the completion, the
  // allocator the mode, policy and device (before anything changes).
  if (msg.match_elements<uma::will_access_atom, uma::session_key, uma::remote_access_plan>()) {
    const auto& r = msg.get_as<uma::remote_access_plan>(2);
    if (!uma::detail::check_completion("will_access", r.reply_when))
      require(static_cast<unsigned>(r.reply_when) <= 1, "accepted completion out of range");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1)
    return 0;
  const auto* rest = data + 1;
  const auto n = size - 1;
  switch (data[0] % 9) {
    case 0:
      decode<uma::session_key>(rest, n, [](const auto&) {});
      break;
    case 1:
      decode<uma::operator_key>(rest, n, [](const auto&) {});
      break;
    case 2:
      decode<uma::remote_allocate_request>(rest, n, check_allocate);
      break;
    case 3:
      decode<uma::remote_prefetch_request>(rest, n, check_prefetch);
      break;
    case 4:
      decode<uma::remote_discard_request>(rest, n, [](const auto& r) {
        if (!uma::detail::check_completion("discard", r.reply_when))
          require(static_cast<unsigned>(r.reply_when) <= 1, "accepted completion out of range");
      });
      break;
    case 5:
      decode<uma::remote_advise_request>(rest, n, check_advise);
      break;
    case 6:
      decode<uma::region_handle>(rest, n, [](const auto&) {});
      break;
    case 8:
      decode<uma::remote_snapshot>(rest, n, check_snapshot);
      break;
    default:
      check_message(rest, n);
      break;
  }
  return 0;
}
