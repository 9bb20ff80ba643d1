// Publishing a gateway through CAF's middleman, and what counts as a loopback address.

#include <uma/actors/remote_gateway.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <caf/io/middleman.hpp>
#include <caf/openssl/publish.hpp>

#include <uma/actors/detail/remote_sessions.hpp>
#include <uma/messages/error_category.hpp>

namespace uma {

std::uint16_t publish_gateway(caf::actor_system& sys, const remote_allocator_actor& gateway,
                              std::uint16_t port, const std::string& bind) {
  if (bind.empty())
    raise(errc::invalid_argument,
          "publish: empty bind address (CAF would listen on every interface); name one, "
          "e.g. 127.0.0.1");
  if (!sys.has_middleman())
    raise(errc::invalid_argument,
          "publish: the actor system has no middleman; load it with "
          "cfg.load<caf::io::middleman>()");
  auto bound = sys.has_openssl_manager()
                   ? caf::openssl::publish(gateway, port, bind.c_str(), false)
                   : sys.middleman().publish(gateway, port, bind.c_str(), false);
  if (!bound)
    raise(errc::backend_error, "publish: cannot listen on " + bind + ":" + std::to_string(port) +
                                   ": " + sys.render(bound.error()));
  return *bound;
}

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
