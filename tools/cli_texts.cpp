// The help texts of the `uma` tool's commands (what CLI11 does not generate).

#include "tools/cli_texts.hpp"

namespace uma::cli {

namespace {

const command_text texts[] = {
    {command::help, "", "uma <command> [options]",
     R"(every command takes -h, --help (its options); info, demo, stats, snapshot and serve (the
commands that run an allocator) take --backend auto|cuda|host (auto, the default: CUDA when a
device is usable, else host) and --host-devices N[:BYTES] (the devices the host backend
emulates: 1 by default); demo, stats, snapshot, serve, regions and restart take
--caf.KEY=VALUE options.
`uma help <command>` or `uma <command> --help` for a command.

exit status: 0 ok, 1 runtime failure (a failed request or check, no usable device for
--backend cuda), 2 usage error
)"},
    {command::info, "the backend, its devices, versions, capability flags, memory model",
     "uma info [--backend auto|cuda|host]",
     R"(
Prints the backend uma runs on (with auto: why CUDA is not usable, when it is not), each
device's name, compute capability and memory, the driver and runtime versions, the capability
flags uma reads for each device, and the memory model they add up to. On the host backend the
devices are emulated (--host-devices N[:BYTES]) and listed as such.
)"},
    {command::demo, "the worker pipeline; then a stop that leaves a held ref's clone inert",
     "uma demo [--backend auto|cuda|host] [--producers N] [--consumers N] [--batches N]\n"
     "                [--floats N] [--inject-fault OP:N:CODE[:every][:fatal]]...",
     R"(
Producer actors allocate batches of floats, fill them, prefetch them to GPU 0 (host backend:
the host), transform them there, bring them back and pass the refs to consumer actors, which
verify every element. Then the allocator stops while a ref is held and a clone of it goes inert.
--inject-fault fails the Nth (with :every, every Nth) call of a backend operation (allocate,
free, prefetch, discard, discard_prefetch, advise, attributes, kind_of, is_capturing,
launch_host_func, synchronize) with an error code; :fatal ends the allocator incarnation and
its supervisor decides (context_lost: restart, unrecoverable: stop, others: escalate).
Exits 1 when a batch mismatches, a request fails or a region is left live; with
--inject-fault only a leak, an unanswered request or an escalation fails the demo.
)"},
    {command::stats, "an allocator's counters as text, JSON or Prometheus text",
     "uma stats [--json | --prometheus] [--workload short|none] [--backend auto|cuda|host]\n"
     "       uma stats --connect unix:PATH|HOST:PORT [--json | --prometheus]",
     R"(
The workload allocates four regions, fills them, prefetches them to device 0 (a GPU on CUDA,
the emulated one on the host), advises two read-mostly, discards one, makes one zero-size request (refused: it shows in the failure
counters) and releases everything; then the counters are printed once every queued backend
call has run.
)"},
    {command::snapshot, "an allocator's regions and event history as JSON or an HTML page",
     "uma snapshot [--json FILE] [--html FILE] [--workload short|none]\n"
     "                    [--backend auto|cuda|host]\n"
     "       uma snapshot --connect unix:OPERATOR-SOCKET|HOST:PORT [--json FILE]\n"
     "                    [--html FILE] [--tls-cert PATH --tls-key PATH --tls-ca PATH]",
     R"(
Runs a short workload on a fresh allocator ("weights", prefetched and advised read-mostly,
and "activations", discarded, stay live while four "scratch" regions come and go), then takes a
snapshot: every region (id, generation, label, bytes, policy, attach flag, advice, last
prefetch location, pins, age), the counters and the event history (allocate, release,
prefetch, advise, discard, stop, restart with timestamps). --json writes it as JSON (- or no
option at all: to stdout); --html writes one self-contained page (no network: its script is
inlined) with live bytes over time stacked by label and a sortable, filterable region table.
With --connect, the snapshot of the allocator a `uma serve` runs there instead (no workload):
every tenant's regions, each with the session whose lease holds it, so only the operator's
connection gets it (the operator socket, or a client certificate `uma serve --operator-cn`
names). Exits 1, saying so, when the allocator is stopped, the server cannot be reached, the
connection is a tenant's or a file cannot be written.
)"},
    {command::serve, "a supervised allocator behind a Unix socket (and a /metrics endpoint)",
     "uma serve [--socket PATH] [--socket-mode 0600|0660] [--operator-socket PATH]\n"
     "                 [--port P [--bind ADDRESS] --tls-cert PATH --tls-key PATH --tls-ca PATH\n"
     "                  [--operator-cn NAME]... [--max-connections-per-address N]]\n"
     "                 [--max-connections-per-identity N]\n"
     "                 [--metrics HOST:PORT [--metrics-token-file PATH [--metrics-labels]]]\n"
     "                 [--for SECONDS] [--quota BYTES] [--backend auto|cuda|host]\n"
     "                 [--inject-fault SPEC]...\n"
     "                 [--arbiter-total DEVICE:BYTES]... [--arbiter-deadline MS]\n"
     "                 [--arbiter-policy TENANT:DEVICE:MIN_BYTES:PRIORITY:WEIGHT]...",
     R"(
Other processes (`uma stats|regions|snapshot|restart --connect`, uma::remote_client, any gRPC
client of actors/remote/wire/remote.proto) allocate, prefetch, advise, discard and release regions
by id; a client's regions are leases of its session, released when it says so or when its
connection drops. A client is known by its connection: its uid on the socket (mode 0600 by
default), the operator on the operator socket, its certificate over TCP (mutual TLS only).
Connections are capped per identity (uid or certificate name) and, on TCP, per address; the
next one is closed at once. SIGHUP reads the TLS files again: new connections use them once
they pass every check; a bad set is logged and the old one stays in force.
Prints `uma serve: listening on unix:PATH ...` and the operator socket once serving (and the
TCP and metrics addresses when asked), then runs until SIGINT or SIGTERM (or --for), stops the
allocator and exits 0 (1 when the supervisor gave up). The metrics endpoint answers GET
/metrics (Prometheus text) and GET /healthz, read-only, on loopback unless --insecure-metrics.
With --arbiter-total the node has an arbiter: it divides each device's BYTES among the
processes that join it over the sockets (tenants "<identity>/<name>", e.g. "uid 1000/infer"),
capped by each tenant's --arbiter-policy; a member given a lower budget has --arbiter-deadline
to evict down to it. Decisions are logged on stderr (at most 100 lines a second); `uma
budgets` shows them and changes the settings, /metrics adds the uma_arbiter_* families. A device
the backend does not have, or BYTES above its memory, is a usage error (exit 2).
)"},
    {command::regions, "the region table of a serving node",
     "uma regions --connect unix:PATH|HOST:PORT [--json]",
     R"(
Prints the region table of the allocator a `uma serve` runs there (every region on the
operator's connection, the session's own otherwise): id, generation,
bytes, label, refs, pins, age, the session whose lease holds the region, and for leased
regions the advice in force and the last prefetch location.
)"},
    {command::restart, "restart a serving node's allocator (its operator only)",
     "uma restart --connect unix:OPERATOR-SOCKET|HOST:PORT\n"
     "                   [--tls-cert PATH --tls-key PATH --tls-ca PATH]",
     R"(
Asks the supervisor of the allocator a `uma serve` runs there for an explicit restart: a new
incarnation (generation) takes over and every session's leases end with the old one (their
refs go inert; tenants allocate again). Only the operator's connection may (the operator
socket, or a client certificate `uma serve --operator-cn` names). Prints the new generation;
exits 1, saying so, when the connection is a tenant's or the server cannot be reached.
)"},
    {command::budgets, "the node arbiter's devices, members and decisions; the operator's settings",
     "uma budgets --connect unix:PATH|HOST:PORT [--json] [--set-total DEVICE:BYTES]\n"
     "                   [--set-policy TENANT:DEVICE:MIN:PRIORITY:WEIGHT]\n"
     "                   [--tls-cert PATH --tls-key PATH --tls-ca PATH]",
     R"(
Prints the arbiter of the `uma serve` there (`uma serve --arbiter-total`): each device's bytes
shared and held, a row per member (id, tenant, state, granted, held and resident bytes, its
claim: min, wanted, priority, weight; shrinks and the slowest one) and the last decisions (20;
all of them with --json). A tenant's connection sees its own identity's members, the
operator's every member. --set-total and --set-policy are the operator's (the operator socket,
or a client certificate `uma serve --operator-cn` names): they change the arbiter live, then
the report is printed. Exits 1, saying so, when the server refuses (a tenant's connection, a
total below the members' minimums, a bad policy), has no arbiter or cannot be reached.
)"},
};

}  // namespace

const std::string_view caf_note =
    "\nCAF options: --caf.KEY=VALUE (for example --caf.scheduler.max-threads=4) and a\n"
    "caf-application.ini in the working directory configure the actor system, as in any CAF\n"
    "application.\n";

std::span<const command_text> command_texts() noexcept {
  return texts;
}

const command_text& text_of(command c) noexcept {
  for (const auto& t : texts)
    if (t.which == c)
      return t;
  return texts[0];
}

}  // namespace uma::cli
