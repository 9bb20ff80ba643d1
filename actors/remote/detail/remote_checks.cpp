#include <uma/actors/remote/detail/remote_checks.hpp>

#include <cstdio>

namespace uma::detail {

namespace {

/// The code point of the UTF-8 sequence at `text[i]` and its length; length 0 for a malformed
/// sequence (an overlong form, a surrogate, a stray continuation byte, a truncated tail).
struct code_point {
  char32_t value = 0;
  std::size_t length = 0;
};

[[nodiscard]] code_point decode_utf8(std::string_view text, std::size_t i) noexcept {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = b(0);
  if (lead < 0x80)
    return {lead, 1};
  const std::size_t n = lead >= 0xf0 && lead < 0xf5 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 ? 2 : 0;
  if (n == 0 || (lead >= 0xe0 && n == 2) || i + n > text.size())
    return {};
  char32_t cp = lead & (0x7f >> n);
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80)
      return {};
    cp = (cp << 6) | (b(k) & 0x3f);
  }
  const char32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return {};
  return {cp, n};
}

/// Code points that change how a line reads on a terminal or page without printing: C0 and C1
/// controls, format characters (bidirectional overrides and isolates, zero-width ones, the soft
/// hyphen, tags) and the line and paragraph separators.
[[nodiscard]] bool is_unsafe(char32_t c) noexcept {
  return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0xad || c == 0x61c || c == 0x180e ||
         (c >= 0x200b && c <= 0x200f) || (c >= 0x2028 && c <= 0x202e) ||
         (c >= 0x2060 && c <= 0x206f) || c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb) ||
         (c >= 0xe0000 && c <= 0xe007f);
}

/// "U+202E".
[[nodiscard]] std::string u_plus(char32_t c) {
  char text[16];
  std::snprintf(text, sizeof text, "U+%04X", static_cast<unsigned>(c));
  return text;
}

[[nodiscard]] std::string hex(char32_t c) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), digits[c & 0xf]);
    c >>= 4;
  } while (c != 0);
  return out;
}

[[nodiscard]] std::string number(auto x) {
  return std::to_string(static_cast<unsigned>(x));
}

}  // namespace

std::optional<refusal> check_allocate(const remote_allocate_request& r,
                                      std::size_t max_label_bytes) {
  if (r.attach != attach_flag::global && r.attach != attach_flag::host)
    return refusal{errc::invalid_argument, "allocate: attach flag " + number(r.attach) +
                                               " is out of range (1: global, 2: host)"};
  if (r.label.size() > max_label_bytes)
    return refusal{errc::invalid_argument,
                   "allocate: the label is " + std::to_string(r.label.size()) +
                       " bytes, over the cap of " + std::to_string(max_label_bytes) + " bytes"};
  for (std::size_t i = 0; i < r.label.size();) {
    const auto cp = decode_utf8(r.label, i);
    if (cp.length == 0)
      return refusal{errc::invalid_argument, "allocate: the label is not UTF-8 at byte " +
                                                 std::to_string(i) + "; labels are printable text"};
    if (is_unsafe(cp.value))
      return refusal{errc::invalid_argument,
                     "allocate: the label has a control, format or separator character (" +
                         u_plus(cp.value) + ") at byte " + std::to_string(i) +
                         "; labels are printable text"};
    i += cp.length;
  }
  return std::nullopt;
}

std::optional<refusal> check_locations(std::string_view op,
                                       const std::vector<location>& locations) {
  for (std::size_t i = 0; i < locations.size(); ++i) {
    const auto k = static_cast<unsigned>(locations[i].type);
    if (k < static_cast<unsigned>(location::kind::device) ||
        k > static_cast<unsigned>(location::kind::host_numa_current))
      return refusal{errc::invalid_argument,
                     std::string(op) + ": location " + std::to_string(i) + " has kind " +
                         std::to_string(k) +
                         ", out of range (1: device, 2: host, 3: host_numa, 4: "
                         "host_numa_current)"};
  }
  return std::nullopt;
}

std::optional<refusal> check_completion(std::string_view op, completion when) {
  if (when != completion::enqueued && when != completion::complete)
    return refusal{errc::invalid_argument, std::string(op) + ": completion " + number(when) +
                                               " is out of range (0: enqueued, 1: complete)"};
  return std::nullopt;
}

std::optional<refusal> check_advise(const remote_advise_request& r) {
  const auto a = static_cast<unsigned>(r.what);
  if (a < static_cast<unsigned>(advice::set_read_mostly) ||
      a > static_cast<unsigned>(advice::unset_accessed_by))
    return refusal{errc::invalid_argument, "advise: advice " + std::to_string(a) +
                                               " is out of range (1 to 6: set_read_mostly to "
                                               "unset_accessed_by)"};
  return check_locations("advise", {r.where});
}

std::optional<refusal> check_snapshot(const remote_snapshot& s) {
  const auto bad = [](std::string what) {
    return refusal{errc::invalid_argument, "snapshot: " + what};
  };
  for (const auto& r : s.regions) {
    const auto row = "region " + std::to_string(r.info.id) + " has ";
    if (r.policy != region_policy::direct && r.policy != region_policy::slab &&
        r.policy != region_policy::block)
      return bad(row + "policy " + number(r.policy) + ", not 0 (direct), 2 (slab) or 3 (block)");
    if (r.info.attach != attach_flag::global && r.info.attach != attach_flag::host)
      return bad(row + "attach flag " + number(r.info.attach) +
                 ", out of range (1: global, 2: host)");
    if (r.has_last_prefetch && check_locations("snapshot", {r.last_prefetch}))
      return bad(row + "a last prefetch location of kind " + number(r.last_prefetch.type) +
                 ", out of range (1 to 4)");
  }
  for (std::size_t i = 0; i < s.events.size(); ++i)
    if (static_cast<unsigned>(s.events[i].kind) > static_cast<unsigned>(event_kind::restart))
      return bad("event " + std::to_string(i) + " has kind " + number(s.events[i].kind) +
                 ", out of range (0 to 6)");
  return std::nullopt;
}

std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum))
    return std::nullopt;
  return sum;
}

refusal overflow_refusal(std::string_view what, std::uint64_t a, std::uint64_t b) {
  return {errc::overflow, std::string(what) + ": " + std::to_string(a) + " + " + std::to_string(b) +
                              " does not fit in 64 bits"};
}

std::string escape_control(std::string_view text) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto cp = decode_utf8(text, i);
    const auto c = static_cast<unsigned char>(text[i]);
    if (cp.length == 0) {  // a byte that is no UTF-8: shown as its value
      out.append("\\x").append(1, digits[c >> 4]).append(1, digits[c & 0xf]);
      ++i;
      continue;
    }
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\\')
      out += "\\\\";
    else if (is_unsafe(cp.value))
      out += cp.value < 0x80 ? "\\x" + std::string(cp.value < 0x10 ? "0" : "") + hex(cp.value)
                             : "\\u{" + hex(cp.value) + "}";
    else
      out.append(text.substr(i, cp.length));
    i += cp.length;
  }
  return out;
}

std::string ipc_refusal_message(const region_handle& h) {
  return "export_ipc: " + to_string(h) +
         " cannot be exported: managed memory cannot be exported over CUDA IPC "
         "(cudaIpcGetMemHandle supports device memory from cudaMalloc only); use the remote "
         "interface's region ids instead";
}

}  // namespace uma::detail
