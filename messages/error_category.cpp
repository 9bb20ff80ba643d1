#include <uma/messages/error_category.hpp>

#include <caf/sec.hpp>

namespace uma {

caf::error make_caf_error(errc code, std::string message) {
  return caf::make_error(code, std::move(message));
}

caf::error make_caf_error(const error& e) {
  return make_caf_error(e.code(), e.what());
}

namespace {
std::string context_text(const caf::error& e) {
  const auto& ctx = e.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return caf::to_string(ctx);
}
}  // namespace

error to_uma_error(const caf::error& e) {
  if (e.category() == error_category && e.code() >= 1 && e.code() < errc_slots)
    return error(static_cast<errc>(e.code()), context_text(e));
  if (e.category() == caf::atom("system")) {
    switch (static_cast<caf::sec>(e.code())) {
      case caf::sec::request_receiver_down:
        return error(errc::allocator_stopped,
                     "the allocator actor went down before it replied (" + caf::to_string(e) + ")");
      case caf::sec::request_timeout:
        return error(errc::timeout, "no reply within the caller's timeout");
      default:
        break;
    }
  }
  return error(errc::backend_error, "actor system error: " + caf::to_string(e));
}

std::string render(const caf::error& e) {
  if (e.category() != error_category)
    return caf::to_string(e);
  const auto code = e.code() >= 1 && e.code() < errc_slots ? to_string(static_cast<errc>(e.code()))
                                                           : std::string_view("unknown");
  return "uma::" + std::string(code) + ": " + context_text(e);
}

}  // namespace uma
