// The usage texts of the `uma` tool (tools/cli_options.hpp declares `usage`).

#include "tools/cli_options.hpp"

namespace uma::cli {

namespace {

constexpr std::string_view overview = R"(usage: uma <command> [options]

commands:
  info    the backend uma runs on, its devices (name, compute capability, memory), driver
          and runtime versions, each device's capability flags and its memory model
  demo    the worker pipeline: producer actors pass managed batches to consumer actors
          through a transform on GPU 0 (host backend: a host loop); then the allocator
          stops while a ref is held, and a clone of that ref is shown to be inert
  stats   a short workload on an allocator, then its counters as text, JSON or
          Prometheus text exposition; with --connect host:port, a serving node's counters
  serve   runs a supervised allocator and publishes its remote interface on a port
          (CAF middleman, loopback by default; no authentication: docs/distributed.md)
  regions the region table of a serving node (--connect host:port)
  help    this text; `uma help <command>` or `uma <command> --help` for a command

every command takes:
  -h, --help                 the command's options
info, demo, stats and serve (the commands that run an allocator) take:
  --backend auto|cuda|host   auto (default): CUDA when a device is usable, else host

exit status: 0 ok, 1 runtime failure (a failed request or check, no usable device for
--backend cuda), 2 usage error
)";

constexpr std::string_view info_usage = R"(usage: uma info [--backend auto|cuda|host]

Prints the backend uma runs on (with auto: why CUDA is not usable, when it is not), each
device's name, compute capability and memory, the driver and runtime versions, the capability
flags uma reads for each device, and the memory model they add up to: whether the GPU can
access CPU memory, how the CPU reaches GPU-resident managed memory, and whether CPU/GPU
atomics work.

  --backend auto|cuda|host   the backend to describe (default auto)
  -h, --help                 this text
)";

constexpr std::string_view demo_usage =
    R"(usage: uma demo [--backend auto|cuda|host] [--producers N] [--consumers N]
                [--batches N] [--floats N] [--inject-fault OP:N:CODE[:every][:fatal]]...

Runs the worker pipeline: producer actors allocate batches of floats through the allocator
actor, fill them, prefetch them to GPU 0 (host backend: the host), transform them there (a CUDA
kernel; on the host backend a host loop), bring them back and pass the refs by message to
consumer actors, which verify every element. Prints a progress line and the allocator's stats,
then stops the allocator while a ref is held and shows that a clone of it went inert.

  --backend auto|cuda|host   the allocator's backend (default auto)
  --producers N              producer actors, 1 to 64 (default 2)
  --consumers N              consumer actors, 1 to 64 (default 2)
  --batches N                batches per producer, 1 to 1048576 (default 8)
  --floats N                 floats per batch, 1 to 268435456 (default 65536)
  --inject-fault SPEC        fail the Nth (with :every, every Nth) call of a backend operation
                             with an error code; :fatal ends the allocator incarnation, and its
                             supervisor decides (context_lost: restart, unrecoverable: stop,
                             others: escalate). OP is allocate, free, prefetch, discard,
                             discard_prefetch, advise, attributes, kind_of, is_capturing,
                             launch_host_func or synchronize. Repeatable. Example:
                             --inject-fault prefetch:5:context_lost
  -h, --help                 this text

The allocator runs under a supervisor; the supervisor's restarts and generations are printed.
Exits 1 when a batch mismatches, a request fails or a region is left live after the run; with
--inject-fault, failed batches are expected and only a leak, an unanswered request or an
escalation fails the demo.
)";

constexpr std::string_view stats_usage =
    R"(usage: uma stats [--json | --prometheus] [--workload short|none]
                 [--backend auto|cuda|host]
       uma stats --connect HOST:PORT [--json | --prometheus]

Spawns an allocator, runs a short workload on it, waits until every queued backend call has
run and prints the allocator's counters. The workload allocates four regions, fills them,
prefetches them (to GPU 0 on CUDA), advises two read-mostly, discards one, makes one zero-size
request (refused: it shows in the failure counters) and releases everything.

  --json                     one JSON object, keys named as the allocator_stats fields
  --prometheus               Prometheus text exposition (# HELP / # TYPE, labels backend,
                             generation; failures by code)
  --workload short|none      the workload above (default), or none: a fresh allocator
  --backend auto|cuda|host   the allocator's backend (default auto)
  --connect HOST:PORT        no local allocator: print the counters of the one a `uma serve`
                             runs there (text adds its supervisor's and sessions' counters)
  -h, --help                 this text
)";

constexpr std::string_view serve_usage =
    R"(usage: uma serve --port P [--bind ADDRESS] [--for SECONDS] [--quota BYTES]
                 [--backend auto|cuda|host] [--inject-fault OP:N:CODE[:every][:fatal]]...

Runs an allocator under a supervisor and publishes its remote-safe interface through CAF's
middleman: other processes (`uma stats --connect`, `uma regions --connect`, programs using
uma::remote_client) allocate, prefetch, advise, discard and release regions by id. Regions a
peer allocates are leases of its session, released when it says so or when its connection
drops. Prints `uma serve: listening on ADDRESS:PORT ...` once published, then runs until
SIGINT or SIGTERM (or --for), stops the allocator and exits 0 (1 when the supervisor gave up).

The middleman authenticates nobody: whoever reaches the port can use the allocator. So the
interface listens on 127.0.0.1 unless --bind names another address, for trusted networks only.

  --port P                   the TCP port, 0 to 65535; 0 takes a free one (printed)
  --bind ADDRESS             the address to listen on (default 127.0.0.1); a non-loopback
                             address is taken only from here, with a warning
  --for SECONDS              stop after this many seconds (1 to 604800)
  --quota BYTES              the allocator's quota (default: the backend's)
  --backend auto|cuda|host   the allocator's backend (default auto)
  --inject-fault SPEC        as for `uma demo` (repeatable)
  -h, --help                 this text
)";

constexpr std::string_view regions_usage =
    R"(usage: uma regions --connect HOST:PORT [--json]

Prints the region table of the allocator a `uma serve` runs at HOST:PORT: id, generation,
bytes, label, refs, pins, age, the session whose lease holds the region, and for leased
regions the advice in force and the last prefetch location, as the serving node reads them.

  --connect HOST:PORT        the serving node ([::1]:PORT for IPv6)
  --json                     one JSON array, one object per region
  -h, --help                 this text
)";

}  // namespace

std::string_view usage(command c) noexcept {
  switch (c) {
    case command::info:
      return info_usage;
    case command::demo:
      return demo_usage;
    case command::stats:
      return stats_usage;
    case command::serve:
      return serve_usage;
    case command::regions:
      return regions_usage;
    case command::help:
      return overview;
  }
  return overview;
}

}  // namespace uma::cli
