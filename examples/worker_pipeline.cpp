// Worker pipeline: producer actors allocate managed batches through the allocator actor, fill
// them, move them to GPU 0 and transform them there, then hand the refs by message to consumer
// actors that verify every element. Prints the allocator's stats at the end; exits non-zero on a
// mismatch, a failed request, or a region still live after the final flush.
//
//   worker_pipeline [--producers N] [--consumers N] [--batches N] [--floats N]
//                   [--backend auto|cuda|host]

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <charconv>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>

#include <uma/actors/client.hpp>
#include <uma/messages/register_types.hpp>
#include "examples/worker_pipeline.hpp"

namespace {

constexpr const char* usage = R"(usage: worker_pipeline [options]

  --producers N              producer actors (default 2)
  --consumers N              consumer actors (default 2)
  --batches N                batches per producer (default 8)
  --floats N                 floats per batch (default 65536)
  --backend auto|cuda|host   allocator backend (default auto: CUDA if a device is usable)
  -h, --help                 this text

exit status: 0 every batch verified and nothing left live, 1 otherwise, 2 bad arguments
)";

struct arguments {
  uma::pipeline::pipeline_options pipeline;
  uma::backend_choice backend = uma::backend_choice::automatic;
  bool help = false;
};

/// A count in [1, 2^30]; nullopt for anything else.
std::optional<std::size_t> parse_count(std::string_view text) {
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > (1u << 30))
    return std::nullopt;
  return value;
}

/// Parses argv; prints what is wrong and returns nullopt on bad input.
std::optional<arguments> parse(int argc, char** argv) {
  arguments a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      a.help = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "worker_pipeline: '%s' is not an option with a value\n", argv[i]);
      return std::nullopt;
    }
    const std::string_view value = argv[++i];
    if (flag == "--backend") {
      const auto choice = uma::parse_backend_choice(value);
      if (!choice) {
        std::fprintf(stderr, "worker_pipeline: unknown backend '%s' (auto, cuda or host)\n",
                     argv[i]);
        return std::nullopt;
      }
      a.backend = *choice;
      continue;
    }
    std::size_t* target = flag == "--producers"   ? &a.pipeline.producers
                          : flag == "--consumers" ? &a.pipeline.consumers
                          : flag == "--batches"   ? &a.pipeline.batches
                          : flag == "--floats"    ? &a.pipeline.floats
                                                  : nullptr;
    if (target == nullptr) {
      std::fprintf(stderr, "worker_pipeline: unknown option '%s'\n", argv[i - 1]);
      return std::nullopt;
    }
    const auto count = parse_count(value);
    if (!count) {
      std::fprintf(stderr, "worker_pipeline: %s needs a count from 1 to 1073741824, not '%s'\n",
                   argv[i - 1], argv[i]);
      return std::nullopt;
    }
    *target = *count;
  }
  return a;
}

struct config : caf::actor_system_config {
  config() { uma::register_types(*this); }
};

}  // namespace

int main(int argc, char** argv) {
  const auto args = parse(argc, argv);
  if (!args) {
    std::fputs(usage, stderr);
    return 2;
  }
  if (args->help) {
    std::fputs(usage, stdout);
    return 0;
  }
  try {
    auto backend = uma::make_backend(args->backend);
    std::cout << "backend: " << backend->description() << "\n"
              << "pipeline: " << uma::pipeline::describe(args->pipeline) << std::endl;

    config cfg;
    caf::actor_system sys{cfg};
    uma::client uma(sys, uma::allocator_config{.backend = {.instance = backend}});
    const auto result = uma::pipeline::run_pipeline(sys, uma.handle(), args->pipeline);

    std::cout << "pipeline: " << uma::pipeline::summarize(result) << "stats after flush:\n"
              << uma::to_string(result.stats);
    if (!result.ok()) {
      std::cout << "FAIL" << std::endl;
      return 1;
    }
    std::cout << "PASS: " << result.verified << " batches verified, no region left live"
              << std::endl;
    return 0;
  } catch (const uma::error& e) {
    std::cerr << "worker_pipeline: " << uma::to_string(e.code()) << ": " << e.what() << "\n";
    return 1;
  }
}
