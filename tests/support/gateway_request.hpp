#pragma once

// One request to a remote gateway from the test's process (no middleman needed): the reply, or
// the uma error it carried, thrown.

#include <chrono>
#include <optional>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <uma/messages/error_category.hpp>
#include <uma/messages/remote_interface.hpp>

namespace uma::test {

template <class R, class... Ts>
R request_gateway(caf::actor_system& sys, const remote_allocator_actor& gateway, Ts&&... xs) {
  caf::scoped_actor self{sys};
  std::optional<R> out;
  caf::error err;
  self->request(gateway, std::chrono::seconds(10), std::forward<Ts>(xs)...)
      .receive([&](R& r) { out = std::move(r); }, [&](caf::error& e) { err = std::move(e); });
  if (err)
    throw to_uma_error(err);
  return std::move(*out);
}

}  // namespace uma::test
