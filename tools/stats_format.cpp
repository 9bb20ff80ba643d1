#include "tools/stats_format.hpp"

#include <cstdio>
#include <iterator>
#include <string_view>

#include <uma/memory/stats_fields.hpp>

#include "tools/json_print.hpp"

namespace uma::cli {

std::string human_bytes(std::uint64_t bytes) {
  constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024)
    return std::to_string(bytes) + " bytes";
  double value = static_cast<double>(bytes) / 1024;
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

boost::json::object to_json_object(const allocator_stats& s) {
  return stats_json_object<boost::json::object>(s);
}

std::string to_json(const allocator_stats& s) {
  return pretty_json(to_json_object(s));
}

}  // namespace uma::cli
