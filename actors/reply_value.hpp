#pragma once

// Reading a request's reply (a caf::message) as a value or as uma's error. Public because
// client.hpp's templates (client::call) read their replies inline; the functions stay in
// uma::detail, as they are not a user's vocabulary.

#include <optional>
#include <utility>

#include <caf/error.hpp>
#include <caf/message.hpp>

#include <uma/messages/error_category.hpp>

namespace uma::detail {

/// The value of a reply of type `R`; its `caf::error` (or an unexpected type) in `err`.
template <class R>
[[nodiscard]] std::optional<R> reply_value(caf::message& reply, caf::error& err) {
  if (reply.match_elements<R>())
    return std::move(reply.get_mutable_as<R>(0));
  if (reply.match_elements<caf::error>())
    err = std::move(reply.get_mutable_as<caf::error>(0));
  else
    err = make_caf_error(errc::backend_error, "unexpected reply type: " + to_string(reply));
  return std::nullopt;
}

/// The value of a reply of type `R`; its error thrown as uma::error.
template <class R>
[[nodiscard]] R take_reply(caf::message& reply) {
  caf::error err;
  if (auto value = reply_value<R>(reply, err))
    return std::move(*value);
  throw to_uma_error(err);
}

}  // namespace uma::detail
