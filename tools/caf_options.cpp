// `--caf.*` options and caf-application.ini: CAF's own parser configures the actor system, after
// uma checked what CAF 0.17 itself does not (it divides by a thread count of 0 and by a steal
// interval of 0, tries to start 10^11 threads, and recurses without a limit into a config file's
// nested lists).

#include <fstream>
#include <string>
#include <thread>

#include <caf/actor_system_config.hpp>
#include <caf/defaults.hpp>
#include <caf/settings.hpp>

#include <uma/sys/error.hpp>
#include "tools/cli_commands.hpp"

namespace uma::cli {

namespace {

constexpr std::size_t max_config_bytes = 64u << 10;
constexpr int max_config_depth = 16;
constexpr std::size_t max_scheduler_threads = 256;

/// Why caf-application.ini in the working directory is not one CAF should parse: over 64 KiB,
/// or lists and groups nested deeper than 16. Empty when it is fine or absent.
[[nodiscard]] std::string check_config_file() {
  std::ifstream in("caf-application.ini", std::ios::binary);
  if (!in)
    return {};
  std::string text(max_config_bytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (static_cast<std::size_t>(in.gcount()) > max_config_bytes)
    return "caf-application.ini is larger than 64 KiB";
  int depth = 0;
  for (std::streamsize i = 0; i < in.gcount(); ++i) {
    const char c = text[static_cast<std::size_t>(i)];
    depth += c == '{' || c == '[' ? 1 : c == '}' || c == ']' ? -1 : 0;
    if (depth > max_config_depth)
      return "caf-application.ini nests lists or groups deeper than 16";
  }
  return {};
}

/// Why the numbers CAF read are not ones it can run with. Empty when they are.
[[nodiscard]] std::string check_numbers(const caf::actor_system_config& cfg) {
  const auto threads = caf::get_or(cfg, "scheduler.max-threads",
                                   static_cast<std::size_t>(std::thread::hardware_concurrency()));
  if (threads < 1 || threads > max_scheduler_threads)
    return "scheduler.max-threads must be from 1 to 256, not " + std::to_string(threads);
  const auto throughput = caf::get_or(cfg, "scheduler.max-throughput", std::size_t{1});
  if (throughput < 1)
    return "scheduler.max-throughput must be at least 1";
  // A worker steals every N-th poll: `i % N` (caf/policy/work_stealing.hpp), SIGFPE for 0.
  namespace ws = caf::defaults::work_stealing;
  for (const auto& [key, fallback] :
       {std::pair{"work-stealing.aggressive-steal-interval", ws::aggressive_steal_interval},
        std::pair{"work-stealing.moderate-steal-interval", ws::moderate_steal_interval},
        std::pair{"work-stealing.relaxed-steal-interval", ws::relaxed_steal_interval}})
    if (caf::get_or(cfg, key, fallback) < 1)
      return std::string(key) + " must be at least 1 (a worker steals every N-th poll)";
  return {};
}

}  // namespace

std::string apply_caf_options(caf::actor_system_config& cfg, const options& o) {
  if (auto bad = check_config_file(); !bad.empty())
    return "CAF's options refused: " + bad;
  caf::actor_system_config::string_list args;
  for (const auto& a : o.caf_args)
    args.push_back("--caf#" + a.substr(std::string_view("--caf.").size()));
  if (auto err = cfg.parse(std::move(args)))
    return "CAF refused its options (" + caf::to_string(err) + ")";
  if (cfg.cli_helptext_printed)
    return "CAF printed its help instead of running";
  if (auto bad = check_numbers(cfg); !bad.empty())
    return "CAF's options refused: " + bad;
  return {};
}

void configure(caf::actor_system_config& cfg, const options& o) {
  if (auto complaint = apply_caf_options(cfg, o); !complaint.empty())
    throw error(errc::invalid_argument, complaint);
}

}  // namespace uma::cli
