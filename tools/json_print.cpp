#include "tools/json_print.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <boost/json/serialize.hpp>

namespace uma::cli {

namespace {

struct layout {
  std::size_t inline_depth;
  bool inline_flat;
};

[[nodiscard]] bool is_container(const boost::json::value& v) noexcept {
  return v.is_object() || v.is_array();
}

[[nodiscard]] bool is_flat(const boost::json::value& v) noexcept {
  if (v.is_object())
    return std::none_of(v.get_object().begin(), v.get_object().end(),
                        [](const auto& kv) { return is_container(kv.value()); });
  return std::none_of(v.get_array().begin(), v.get_array().end(), is_container);
}

/// Doubles in their shortest round-trip form ("6.0165", not Boost.JSON's "6.0165E0").
void write_scalar(std::string& out, const boost::json::value& v) {
  if (v.is_double() && std::isfinite(v.get_double())) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, v.get_double()).ptr;
    out.append(text, end);
    return;
  }
  out += boost::json::serialize(v);
}

void write(std::string& out, const boost::json::value& v, std::size_t depth, const layout& how) {
  const bool is_object = v.is_object();
  if (!is_container(v)) {
    write_scalar(out, v);
    return;
  }
  const bool empty = is_object ? v.get_object().empty() : v.get_array().empty();
  out += is_object ? '{' : '[';
  if (empty) {
    out += is_object ? '}' : ']';
    return;
  }
  const bool one_line = depth >= how.inline_depth || (how.inline_flat && depth > 0 && is_flat(v));
  // Appended, not `"\n" + std::string(...)`: GCC 12 at -O3 reports a false -Wrestrict for that.
  std::string indent;
  if (!one_line)
    indent.append(1, '\n').append(2 * (depth + 1), ' ');
  bool first = true;
  const auto separator = [&] {
    if (!first)
      out += ',';
    out += one_line ? (first ? "" : " ") : indent;
    first = false;
  };
  if (is_object) {
    for (const auto& kv : v.get_object()) {
      separator();
      out += boost::json::serialize(boost::json::value(kv.key())) + ": ";
      write(out, kv.value(), depth + 1, how);
    }
  } else {
    for (const auto& e : v.get_array()) {
      separator();
      write(out, e, depth + 1, how);
    }
  }
  if (!one_line)
    out.append(1, '\n').append(2 * depth, ' ');
  out += is_object ? '}' : ']';
}

}  // namespace

std::string pretty_json(const boost::json::value& v, std::size_t inline_depth, bool inline_flat) {
  std::string out;
  write(out, v, 0, layout{inline_depth, inline_flat});
  out += '\n';
  return out;
}

}  // namespace uma::cli
