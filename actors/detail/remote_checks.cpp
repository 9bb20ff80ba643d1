#include <uma/actors/detail/remote_checks.hpp>

namespace uma::detail {

namespace {

[[nodiscard]] bool is_control(unsigned char c) noexcept {
  return c < 0x20 || c == 0x7f;
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
  for (std::size_t i = 0; i < r.label.size(); ++i)
    if (is_control(static_cast<unsigned char>(r.label[i])))
      return refusal{errc::invalid_argument, "allocate: the label has a control character (" +
                                                 escape_control(r.label.substr(i, 1)) +
                                                 ") at byte " + std::to_string(i) +
                                                 "; labels are printable text"};
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
    if (static_cast<unsigned>(r.policy) > static_cast<unsigned>(region_policy::slab))
      return bad(row + "policy " + number(r.policy) + ", out of range (0 to 2)");
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
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\\')
      out += "\\\\";
    else if (is_control(c))
      out.append("\\x").append(1, digits[c >> 4]).append(1, digits[c & 0xf]);
    else
      out.push_back(ch);
  }
  return out;
}

}  // namespace uma::detail
