#include <uma/messages/register_types.hpp>

#include <uma/messages/error_category.hpp>
#include <uma/messages/remote_interface.hpp>

namespace uma {

void register_types(caf::actor_system_config& cfg) {
  cfg.add_error_category(error_category,
                         [](std::uint8_t code, caf::atom_value, const caf::message& ctx) {
                           return render(caf::error(code, error_category, ctx));
                         });
  // The remote-safe interface: CAF 0.17 serializes only registered types, and both ends must
  // agree on these names (they are part of the interface a remote_actor lookup checks).
  // add_message_type<T> registers std::vector<T> as well.
  cfg.add_message_type<region_handle>("uma::region_handle");
  cfg.add_message_type<session_key>("uma::session_key");
  cfg.add_message_type<operator_key>("uma::operator_key");
  cfg.add_message_type<remote_allocate_request>("uma::remote_allocate_request");
  cfg.add_message_type<remote_prefetch_request>("uma::remote_prefetch_request");
  cfg.add_message_type<remote_discard_request>("uma::remote_discard_request");
  cfg.add_message_type<remote_advise_request>("uma::remote_advise_request");
  cfg.add_message_type<remote_op_result>("uma::remote_op_result");
  cfg.add_message_type<remote_attributes>("uma::remote_attributes");
  cfg.add_message_type<remote_region_info>("uma::remote_region_info");
  cfg.add_message_type<region_page>("uma::region_page");
  cfg.add_message_type<remote_region_page>("uma::remote_region_page");
  cfg.add_message_type<remote_stats>("uma::remote_stats");
  cfg.add_message_type<remote_snapshot>("uma::remote_snapshot");
  cfg.add_message_type<remote_access_plan>("uma::remote_access_plan");
  cfg.add_message_type<residency_result>("uma::residency_result");
}

}  // namespace uma
