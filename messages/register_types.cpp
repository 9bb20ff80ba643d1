#include "messages/register_types.hpp"

#include "messages/error_category.hpp"

namespace uma {

void register_types(caf::actor_system_config& cfg) {
  cfg.add_error_category(error_category,
                         [](std::uint8_t code, caf::atom_value, const caf::message& ctx) {
                           return render(caf::error(code, error_category, ctx));
                         });
}

}  // namespace uma
