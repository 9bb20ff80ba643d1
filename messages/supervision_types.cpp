#include <uma/messages/supervision_types.hpp>

namespace uma {

std::string_view to_string(supervisor_state s) noexcept {
  switch (s) {
    case supervisor_state::running:
      return "running";
    case supervisor_state::restarting:
      return "restarting";
    case supervisor_state::stopped:
      return "stopped";
  }
  return "stopped";
}

std::string_view to_string(restart_cause c) noexcept {
  switch (c) {
    case restart_cause::failure:
      return "failure";
    case restart_cause::requested:
      return "requested";
    case restart_cause::stopped:
      return "stopped";
  }
  return "stopped";
}

}  // namespace uma
