// The operator key, and what counts as a loopback address.

#include <uma/actors/remote/remote_gateway.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <uma/actors/remote/detail/remote_sessions.hpp>

namespace uma {

operator_key make_operator_key() {
  return detail::random_operator_key();
}

bool is_loopback_address(std::string_view address) noexcept {
  if (address.size() >= 2 && address.front() == '[' && address.back() == ']')
    address = address.substr(1, address.size() - 2);
  if (address == "localhost")
    return true;
  char text[INET6_ADDRSTRLEN + 1] = {};
  if (address.empty() || address.size() >= sizeof text)
    return false;
  address.copy(text, address.size());
  in_addr v4{};
  if (inet_pton(AF_INET, text, &v4) == 1)
    return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, text, &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6))
      return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

}  // namespace uma
