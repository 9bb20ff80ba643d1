// libFuzzer target for what a client puts on the gRPC wire, and what a server sends back
// (docs/reliability.md, "Fuzzing"): the first byte picks one of the messages of
// actors/remote/wire/remote.proto, the rest is parsed by protobuf and converted by the wire's own
// code (actors/remote/wire/detail/wire_convert.hpp: enum-like fields above 255 refused) into uma's
// values, which then go through the gateway's checks (actors/remote/detail/remote_checks.hpp; for a
// snapshot, what a server sends, the client's), and
//   * a value the checks accept has every enum in range and a label under the cap;
//   * a converted value converts back to the wire and again to an equal value.
// A first byte of 10 gives the rest to the HTTP/2 frame guards of the wire's front instead
// (wire_frames_fuzz.cpp).
// A crash, a sanitizer report, an unbounded allocation or a failed check is a finding.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include <google/protobuf/stubs/logging.h>
#include <remote.pb.h>

#include <uma/actors/remote/detail/remote_checks.hpp>
#include <uma/actors/remote/wire/detail/wire_convert.hpp>
#include <uma/memory/allocator_snapshot.hpp>
#include <uma/memory/event_history.hpp>
#include <uma/sys/error.hpp>

void fuzz_http2_frames(const std::uint8_t* data, std::size_t size);  // wire_frames_fuzz.cpp

namespace {

namespace w = uma::wire::v1;
using uma::detail::from_wire;
using uma::detail::to_wire;

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
T comparable(T x) {
  return x;
}

/// Parses a `Wire` from `data` and converts it; `check` sees the value, and a reply type (one
/// with `to_wire`) must survive the way back. Nothing else happens when it does not parse or
/// convert (the server replies invalid_argument then).
template <class Wire, class Check>
void decode(const std::uint8_t* data, std::size_t size, Check check) {
  Wire m;
  if (!m.ParseFromArray(data, static_cast<int>(size)))
    return;
  try {
    auto x = comparable(from_wire(m));
    check(x);
    if constexpr (requires(const decltype(x)& v, Wire& out) { to_wire(v, out); }) {
      Wire back;
      to_wire(x, back);
      require(comparable(from_wire(back)) == x, "a round trip changed the value");
    }
  } catch (const uma::error& e) {
    require(e.code() == uma::errc::invalid_argument, "a conversion failed with another code");
  }
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
    require(r.policy == uma::region_policy::direct || r.policy == uma::region_policy::slab ||
                r.policy == uma::region_policy::block,
            "an accepted region policy is out of range");
    require(r.info.attach == uma::attach_flag::global || r.info.attach == uma::attach_flag::host,
            "an accepted snapshot attach flag is out of range");
    require(!r.has_last_prefetch || in_range(r.last_prefetch),
            "an accepted last prefetch location is out of range");
  }
  for (const auto& e : s.events)
    require(static_cast<unsigned>(e.kind) <= static_cast<unsigned>(uma::event_kind::restart),
            "an accepted event kind is out of range");
}

}  // namespace

/// Protobuf logs every string field that is not UTF-8 (proto3 refuses them when parsing): the
/// refusal is what is tested, the log is noise.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1)
    return 0;
  const auto* rest = data + 1;
  const auto n = size - 1;
  const auto none = [](const auto&) {};
  switch (data[0] % 11) {
    case 0:
      decode<w::SessionKey>(rest, n, none);
      break;
    case 1:
      decode<w::AllocateRequest>(rest, n, check_allocate);
      break;
    case 2:
      decode<w::PrefetchRequest>(rest, n, check_prefetch);
      break;
    case 3:
      decode<w::DiscardRequest>(rest, n, [](const auto& r) {
        if (!uma::detail::check_completion("discard", r.reply_when))
          require(static_cast<unsigned>(r.reply_when) <= 1, "accepted completion out of range");
      });
      break;
    case 4:
      decode<w::AdviseRequest>(rest, n, check_advise);
      break;
    case 5:
      // An access plan's mode, policy and device are the allocator's to check; the gateway
      // checks the completion.
      decode<w::AccessPlan>(rest, n, [](const auto& r) {
        if (!uma::detail::check_completion("will_access", r.reply_when))
          require(static_cast<unsigned>(r.reply_when) <= 1, "accepted completion out of range");
      });
      break;
    case 6:
      decode<w::RegionRow>(rest, n, none);
      break;
    case 7:
      decode<w::Stats>(rest, n, none);
      break;
    case 8:
      decode<w::Attributes>(rest, n, none);
      break;
    case 9:
      decode<w::Snapshot>(rest, n, check_snapshot);
      break;
    default:
      fuzz_http2_frames(rest, n);
      break;
  }
  return 0;
}
