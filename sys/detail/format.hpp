#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace uma::detail {

/// "0x7f12a4000000": pointers in error messages.
[[nodiscard]] inline std::string hex(const void* ptr) {
  char buf[2 + 2 * sizeof(void*) + 1];
  std::snprintf(buf, sizeof buf, "%#llx",
                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(ptr)));
  return buf;
}

/// "1048576 bytes": sizes in error messages keep the exact count.
[[nodiscard]] inline std::string bytes(std::size_t n) {
  return std::to_string(n) + " bytes";
}

}  // namespace uma::detail
