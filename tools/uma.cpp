// The `uma` command line tool.
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <numeric>
#include <string>
#include <string_view>

#include "actors/client.hpp"
#include "messages/register_types.hpp"

namespace {

constexpr const char* usage = R"(usage: uma <command> [options]

commands:
  demo      allocate, fill, prefetch, advise, read back attributes, print stats, stop the
            allocator and show that a clone of a ref went inert
  help      this text

options:
  --backend auto|cuda|host   which backend to run on (default auto: CUDA if a device is
                             usable, else host)
)";

struct options {
  std::string command;
  uma::backend_choice backend = uma::backend_choice::automatic;
};

/// Parses argv; prints what is wrong and returns nullopt on bad input.
std::optional<options> parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "help") {
      o.command = "help";
    } else if (arg == "--backend") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "uma: --backend needs a value (auto, cuda or host)\n");
        return std::nullopt;
      }
      const auto choice = uma::parse_backend_choice(argv[++i]);
      if (!choice) {
        std::fprintf(stderr, "uma: unknown backend '%s' (expected auto, cuda or host)\n", argv[i]);
        return std::nullopt;
      }
      o.backend = *choice;
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "uma: unknown option '%s'\n", argv[i]);
      return std::nullopt;
    } else if (o.command.empty()) {
      o.command = arg;
    } else {
      std::fprintf(stderr, "uma: unexpected argument '%s'\n", argv[i]);
      return std::nullopt;
    }
  }
  if (o.command.empty())
    o.command = "help";
  return o;
}

struct cli_config : caf::actor_system_config {
  cli_config() { uma::register_types(*this); }
};

std::string describe(const std::optional<uma::location>& loc) {
  return loc ? uma::to_string(*loc) : std::string("none");
}

int demo(const options& o) {
  auto backend = uma::make_backend(o.backend);
  std::cout << "backend: " << uma::to_string(backend->kind()) << " (" << backend->description()
            << ")\n";
  cli_config cfg;
  caf::actor_system sys{cfg};
  uma::client uma(sys, uma::allocator_config{.backend = backend});

  constexpr std::size_t n = 1 << 20;
  auto data = uma.allocate<float>(n, {.label = "demo"});
  std::cout << "allocated " << data.bytes() << " bytes, region " << data.id() << ", generation "
            << data.generation() << "\n";
  {
    auto pin = data.pin();
    std::iota(pin.begin(), pin.end(), 0.0f);
  }
  const auto target =
      backend->device_count() > 0 ? uma::location::device(0) : uma::location::host();
  const auto res = uma.prefetch(data, target, {}, uma::completion::complete);
  std::cout << "prefetched " << res.bytes << " bytes to " << uma::to_string(target) << "\n";
  uma.advise(data, uma::advice::set_read_mostly);
  uma.advise(data, uma::advice::set_preferred_location, target);
  const auto attrs = uma.attributes(data);
  std::cout << "attributes: read_mostly=" << (attrs.read_mostly ? "true" : "false")
            << " preferred_location=" << describe(attrs.preferred_location)
            << " last_prefetch_location=" << describe(attrs.last_prefetch_location) << "\n";
  {
    auto pin = data.pin();
    const double sum = std::accumulate(pin.begin(), pin.end(), 0.0);
    std::cout << "read back: sum of 0.." << n - 1 << " = " << sum << "\n";
  }
  std::cout << "stats:\n" << uma::to_string(uma.stats());
  auto clone = data;
  uma.stop();
  const auto report = clone.stop_info();
  std::cout << "allocator stopped: freed " << (report ? report->regions_freed : 0) << " region(s), "
            << (report ? report->bytes_freed : 0) << " bytes, leaked "
            << (report ? report->regions_leaked : 0) << "\n";
  std::cout << "clone after stop: valid=" << (clone.valid() ? "true" : "false")
            << " data=" << static_cast<const void*>(clone.data()) << "\n";
  return clone.valid() ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const auto o = parse(argc, argv);
  if (!o) {
    std::fputs(usage, stderr);
    return 2;
  }
  try {
    if (o->command == "help") {
      std::fputs(usage, stdout);
      return 0;
    }
    if (o->command == "demo")
      return demo(*o);
    std::fprintf(stderr, "uma: unknown command '%s'\n", o->command.c_str());
    std::fputs(usage, stderr);
    return 2;
  } catch (const uma::error& e) {
    std::fprintf(stderr, "uma: %s: %s\n", std::string(uma::to_string(e.code())).c_str(), e.what());
    return 1;
  }
}
