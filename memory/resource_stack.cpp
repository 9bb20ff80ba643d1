#include <uma/memory/resource_stack.hpp>

namespace uma {

resource_stack::resource_stack(std::shared_ptr<backend> b, const resource_stack_config& config) {
  const std::size_t quota = config.quota_bytes != 0 ? config.quota_bytes : b->default_quota();
  backend_ = std::make_unique<backend_resource>(std::move(b));
  limit_ = std::make_unique<limit_resource>(*backend_, quota);
  statistics_ = std::make_unique<statistics_resource>(*limit_);
  tracking_ = std::make_unique<tracking_resource>(*statistics_);
}

std::shared_ptr<resource_stack> make_resource_stack(std::shared_ptr<backend> b,
                                                    const resource_stack_config& config) {
  return std::make_shared<resource_stack>(std::move(b), config);
}

}  // namespace uma
