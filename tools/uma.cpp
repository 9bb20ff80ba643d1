// The `uma` command line tool: parses the command line and runs one command.
//
//   uma --version
//   uma info  [--backend auto|cuda|host]
//   uma demo  [--backend ...] [--producers N] [--consumers N] [--batches N] [--floats N]
//   uma stats [--json | --prometheus] [--workload short|none] [--backend ...]
//   uma stats --connect unix:PATH|HOST:PORT [--json | --prometheus]
//   uma serve [--socket PATH] [--port P --tls-*] [--metrics HOST:PORT] [--for SECONDS]
//             [--arbiter-total DEVICE:BYTES]... ...
//   uma regions --connect unix:PATH|HOST:PORT [--json]
//   uma snapshot [--json FILE] [--html FILE] [--workload short|none] [--backend ...]
//   uma restart --connect unix:OPERATOR-SOCKET|HOST:PORT
//   uma budgets --connect unix:PATH|HOST:PORT [--json] [--set-total D:B] [--set-policy SPEC]
//   (demo, stats, serve, regions: also --caf.KEY=VALUE, and caf-application.ini is read)
//
// Exit status: 0 ok, 1 runtime failure, 2 usage error (tools/cli_options.hpp).

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <uma/sys/error.hpp>
#include "tools/cli_commands.hpp"
#include "tools/cli_hardening.hpp"
#include "tools/cli_options.hpp"

namespace {

int dispatch(const uma::cli::options& o) {
  using uma::cli::command;
  if (o.version) {
    std::printf("uma %s\n", uma::cli::version());
    return uma::cli::exit_ok;
  }
  if (o.help) {
    std::fputs(uma::cli::usage(o.what).c_str(), stdout);
    return uma::cli::exit_ok;
  }
  switch (o.what) {
    case command::info:
      return uma::cli::run_info(o);
    case command::demo:
      return uma::cli::run_demo(o);
    case command::stats:
      return uma::cli::run_stats(o);
    case command::serve:
      return uma::cli::run_serve(o);
    case command::regions:
      return uma::cli::run_regions(o);
    case command::snapshot:
      return uma::cli::run_snapshot(o);
    case command::restart:
      return uma::cli::run_restart(o);
    case command::budgets:
      return uma::cli::run_budgets(o);
    case command::help:
      break;
  }
  std::fputs(uma::cli::usage(command::help).c_str(), stdout);
  return uma::cli::exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  const auto parsed = uma::cli::parse_arguments(args);
  if (!parsed.parsed) {
    const std::string help_hint =
        parsed.context == uma::cli::command::help
            ? std::string("uma --help")
            : "uma " + std::string(uma::cli::to_string(parsed.context)) + " --help";
    std::fprintf(stderr, "%s\nrun '%s' for usage\n", parsed.error.c_str(), help_hint.c_str());
    return uma::cli::exit_usage;
  }
  const auto& o = *parsed.parsed;
  if (!o.help && !o.version) {
    // CAF's options and the hardening flags are a usage matter too: checked (CAF's on a
    // scratch configuration) before any command starts an actor system or listens.
    std::string complaint = uma::cli::hardening_complaint(o);
    if (complaint.empty() && o.what != uma::cli::command::info &&
        o.what != uma::cli::command::budgets) {
      uma::cli::actor_config scratch;
      complaint = uma::cli::apply_caf_options(scratch, o);
    }
    if (!complaint.empty()) {
      const std::string name(uma::cli::to_string(o.what));
      std::fprintf(stderr, "uma %s: %s\nrun 'uma %s --help' for usage\n", name.c_str(),
                   complaint.c_str(), name.c_str());
      return uma::cli::exit_usage;
    }
  }
  try {
    return dispatch(o);
  } catch (const uma::error& e) {
    std::fprintf(stderr, "uma: %s: %s\n", std::string(uma::to_string(e.code())).c_str(), e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uma: %s\n", e.what());
  }
  return uma::cli::exit_failure;
}
