// A program that links only uma::sys from an installed uma: the backend layer, without CAF
// (its CMakeLists.txt checks that uma::sys and uma::memory bring no CAF into the link).

#include <cstring>
#include <iostream>

#include <uma/sys/error.hpp>
#include <uma/sys/host_backend.hpp>

int main() {
  try {
    uma::host_backend backend;
    constexpr std::size_t bytes = 1 << 16;
    auto* p =
        static_cast<unsigned char*>(backend.allocate_managed(bytes, uma::attach_flag::global));
    std::memset(p, 7, bytes);
    const bool filled = p[0] == 7 && p[bytes - 1] == 7;
    backend.free_managed(p, bytes);
    if (!filled || backend.counters().allocations != 1) {
      std::cout << "FAIL: the host backend's memory or counters are wrong\n";
      return 1;
    }
    std::cout << "OK: uma::sys without CAF, " << backend.description() << "\n";
    return 0;
  } catch (const uma::error& e) {
    std::cout << "FAIL: " << uma::to_string(e.code()) << ": " << e.what() << "\n";
    return 1;
  }
}
