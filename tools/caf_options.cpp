// `--caf.*` options and caf-application.ini: CAF's own parser configures the actor system.

#include <string>

#include <caf/actor_system_config.hpp>

#include <uma/sys/error.hpp>
#include "tools/cli_commands.hpp"

namespace uma::cli {

std::string apply_caf_options(caf::actor_system_config& cfg, const options& o) {
  caf::actor_system_config::string_list args;
  for (const auto& a : o.caf_args)
    args.push_back("--caf#" + a.substr(std::string_view("--caf.").size()));
  if (auto err = cfg.parse(std::move(args)))
    return "CAF refused its options (" + caf::to_string(err) + ")";
  if (cfg.cli_helptext_printed)
    return "CAF printed its help instead of running";
  return {};
}

void configure(caf::actor_system_config& cfg, const options& o) {
  if (auto complaint = apply_caf_options(cfg, o); !complaint.empty())
    throw error(errc::invalid_argument, complaint);
}

}  // namespace uma::cli
