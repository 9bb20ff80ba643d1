#!/usr/bin/env python3
"""Docs that cannot drift: every C++, C, Python and shell block of README.md and docs/*.md is run
by the test suite or marked as not runnable, with the reason.

A block's marker is an HTML comment on the line just before its fence (invisible on GitHub):

  <!-- doc-test: run -->                       C++: a whole program (its main runs); sh: run it
                                              with `uma` the built tool, in a scratch folder;
                                              python: run with python/ and the stand-in
                                              frameworks (tests/python/fakes) importable
  <!-- doc-test: fragment HARNESS -->         C++: completed by HARNESS (below), compiled, run
  <!-- doc-test: compile HARNESS (reason) --> C++: completed by HARNESS, compiled, not run
  <!-- doc-test: transcript -->               console: each `$ COMMAND` line runs (as sh does);
                                              the output shown under it must appear, in order
                                              (TRANSCRIPT_RULES below); a command shown without
                                              output must exit 0
  <!-- doc-test: skip (reason) -->            not run; the reason says why

`serve` after run, fragment or transcript (`run serve`, `fragment split_main serve`) runs the
block against a `uma serve` of its own (SERVE_ARGS: host backend, its Unix sockets in the
block's scratch folder, a metrics endpoint on a free loopback port), started before the block and
stopped with SIGTERM after it: the block reads UMA_SERVER (unix:PATH, the tenants' socket),
UMA_OPERATOR (unix:PATH, the operator socket) and UMA_METRICS (HOST:PORT of /metrics); a C++
block gets `target` and `operator_target` (SERVED_PRELUDE). The server must start, announce
itself on the sockets it was given and stop cleanly (exit 0, its "stopping after SIGTERM" line),
or the block's test fails.

Blocks of other languages (text, json, yaml, cmake: outputs, diagrams, configuration) need no
marker. A code block without a marker, a fence without a language, or a marker the harness does
not know fails `check`.

  doc_blocks.py check ROOT                       the markers (a CTest)
  doc_blocks.py cpp ROOT OUT.cpp                 one translation unit of every C++ block
  doc_blocks.py list ROOT LANG                   the ids of the runnable blocks of LANG
  doc_blocks.py run ROOT ID --uma PATH [...]     run one block (C++ through --cpp-runner)
"""

import argparse
import contextlib
import ctypes
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CODE_LANGS = {"cpp": "cpp", "c++": "cpp", "c": "c", "python": "python", "py": "python",
              "sh": "sh", "bash": "sh", "shell": "sh", "console": "sh"}
TEXT_LANGS = {"text", "json", "yaml", "cmake", "ini", "toml", "html", "csv"}
MARKER = re.compile(r"^<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


class Block:
    def __init__(self, path, line, lang, info, marker, text):
        self.path, self.line, self.lang, self.info = path, line, lang, info
        self.marker, self.text = marker, text
        self.mode, self.harness, self.reason, self.error = None, None, None, None
        self._parse_marker()

    @property
    def id(self):
        return f"{self.path}:{self.line}"

    @property
    def ident(self):
        """The block's id as a C++ identifier."""
        return re.sub(r"[^A-Za-z0-9]", "_", self.id)

    def _parse_marker(self):
        self.serve = False
        if self.marker is None:
            return
        m = re.match(r"^(run|skip|fragment|compile|transcript)\b\s*([^(]*?)\s*(?:\((.*)\))?\s*$",
                     self.marker)
        words = m.group(2).split() if m else []
        self.serve = "serve" in words
        words = [w for w in words if w != "serve"]
        if not m or len(words) > 1:
            self.error = f"unknown marker '{self.marker}'"
            return
        self.mode, self.harness, self.reason = m.group(1), words[0] if words else None, m.group(3)
        if self.serve and self.mode not in ("run", "fragment", "transcript"):
            self.error = f"'serve' is for run, fragment and transcript blocks, not {self.mode}"
        elif self.mode in ("run", "transcript") and self.harness:
            self.error = f"'{self.mode}' takes no harness ('{self.harness}')"
        elif self.serve and self.lang == "cpp" and self.mode != "fragment":
            self.error = "a C++ block with 'serve' is a fragment (its harness gives target)"
        elif self.mode == "transcript" and self.lang != "sh":
            self.error = "'transcript' is for shell (console) blocks only"
        elif self.mode == "transcript" and not transcript_steps(self.text):
            self.error = "a transcript without a '$ COMMAND' line"
        elif self.mode == "skip" and not (self.reason or "").strip():
            self.error = "skip without a reason: <!-- doc-test: skip (why) -->"
        elif self.mode in ("fragment", "compile") and self.lang != "cpp":
            self.error = f"'{self.mode}' is for C++ blocks only"
        elif self.mode in ("fragment", "compile") and self.harness not in HARNESSES:
            self.error = (f"unknown harness '{self.harness}' (known: "
                          f"{', '.join(sorted(HARNESSES))})")
        elif self.mode == "compile" and not (self.reason or "").strip():
            self.error = "compile without a reason: <!-- doc-test: compile HARNESS (why) -->"
        elif self.mode == "run" and self.lang not in ("cpp", "sh", "python"):
            self.error = f"'run' is not supported for {self.lang} blocks"


def doc_files(root):
    root = Path(root)
    return [root / "README.md"] + sorted((root / "docs").glob("*.md"))


def blocks_of(root, path):
    lines = path.read_text(encoding="utf-8").split("\n")
    rel = str(path.relative_to(root))
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        info, start = m.group(2), i
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        prev = lines[start - 1] if start > 0 else ""
        mm = MARKER.match(prev.strip())
        lang = CODE_LANGS.get(info.lower()) if info else None
        out.append(Block(rel, start + 1, lang, info, mm.group(1) if mm else None,
                         "\n".join(lines[start + 1:j])))
        i = j + 1
    return out


def all_blocks(root):
    return [b for path in doc_files(root) for b in blocks_of(Path(root), path)]


def problems(root):
    found = []
    for b in all_blocks(root):
        if b.error:
            found.append(f"{b.id}: {b.error}")
        elif not b.info:
            found.append(f"{b.id}: a fence without a language (```text for output or diagrams)")
        elif b.lang is None and b.info.lower() not in TEXT_LANGS:
            found.append(f"{b.id}: unknown language '{b.info}' (a code language, or one of "
                         f"{', '.join(sorted(TEXT_LANGS))})")
        elif b.lang is not None and b.marker is None:
            found.append(f"{b.id}: a {b.info} block without a <!-- doc-test: ... --> marker "
                         "(run, fragment HARNESS, compile HARNESS (why) or skip (why))")
        elif b.lang == "c" and b.mode != "skip":
            found.append(f"{b.id}: C blocks are only skipped so far (no C harness)")
    return found


# -- C++: one translation unit ------------------------------------------------------------------

# What completes a fragment: code before it at namespace scope, code around it in a function.
# `{body}` is the block. Every harness gets a configured actor system, so a fragment may use
# `sys`; see each one's names.
PRELUDE = """struct doc_config : caf::actor_system_config {
  doc_config() { uma::register_types(*this); }
};
"""
HARNESSES = {
    # The block's own top-level declarations (up to its last column-0 `};`), then the rest as
    # main's body.
    "split_main": None,
    # sys (an actor system with uma's types), cfg (its config), uma (a client on the host
    # backend), supervisor_or_allocator_handle (its allocator), n (a count of floats).
    "with_client": """  [[maybe_unused]] uma::client uma(sys, {{.backend = {{.choice = uma::backend_choice::host}}}});
  [[maybe_unused]] auto supervisor_or_allocator_handle = uma.handle();
  [[maybe_unused]] std::size_t n = 1024;
  using namespace std::chrono_literals;
{body}
""",
    # config (an allocator_config for the host backend), n (a count of floats).
    "with_residency": """  [[maybe_unused]] uma::allocator_config config{{.backend = {{.choice = uma::backend_choice::host}}}};
  [[maybe_unused]] std::size_t n = 1024;
{body}
""",
    # c (a client), chunks (eight refs), passes, stream, and stand-ins for a kernel launch and
    # cudaStreamSynchronize (the block's CUDA work, which the host backend has none of).
    "with_chunks": """  uma::client c(sys, {{.backend = {{.choice = uma::backend_choice::host}}}});
  std::vector<uma::ManagedRef<float>> chunks;
  for (int i = 0; i < 8; ++i)
    chunks.push_back(c.allocate<float>(1024));
  [[maybe_unused]] std::size_t passes = 2;
  [[maybe_unused]] void* stream = nullptr;
  auto launch_kernel = [](const uma::ManagedRef<float>&, void*) {{}};
  auto cudaStreamSynchronize = [](void*) {{ return 0; }};
{body}
""",
    # sup: a supervisor over a host allocator (and sys, cfg).
    "with_supervisor": """  uma::supervisor_config supervised;
  supervised.allocator.backend.choice = uma::backend_choice::host;
  auto sup = uma::spawn_supervisor(sys, supervised);
  using namespace std::chrono_literals;
{body}
""",
    # self (caf::event_based_actor*) in a function-based actor, and alloc: an allocator that has
    # stopped already (the trap such handlers meet: CAF answers request_receiver_down).
    "in_actor": """  auto alloc = uma::spawn_allocator(sys, {{.backend = {{.choice = uma::backend_choice::host}}}});
  {{
    caf::scoped_actor stopper{{sys}};
    stopper->monitor(alloc);
    stopper->send_exit(alloc, caf::exit_reason::user_shutdown);
    stopper->receive([](const caf::down_msg&) {{}});
  }}
  sys.spawn([alloc](caf::event_based_actor* self) {{
    using namespace std::chrono_literals;
{body}
  }});
""",
    # A coroutine with net (boost::asio), bridge (over a host client) and an io_context it runs on.
    "in_coroutine": None,
    # cfg (a config with uma's types) and net (boost::asio) only: the block makes its own system.
    "with_config": None,
}

# What a C++ fragment marked `serve` gets first: the targets (remote_client's "unix:PATH") of
# the harness's `uma serve`, its tenants' socket and its operator socket.
SERVED_PRELUDE = """  const char* uma_server = std::getenv("UMA_SERVER");  // doc_blocks.py run sets both:
  const char* uma_operator = std::getenv("UMA_OPERATOR");  // unix:PATH
  if (uma_server == nullptr || uma_operator == nullptr ||
      std::string(uma_server).rfind("unix:", 0) != 0 ||
      std::string(uma_operator).rfind("unix:", 0) != 0) {
    std::fprintf(stderr, "this block needs UMA_SERVER and UMA_OPERATOR (unix:PATH)\\n");
    return 2;
  }
  [[maybe_unused]] const std::string target = uma_server;
  [[maybe_unused]] const std::string operator_target = uma_operator;
"""

COROUTINE = """  net::io_context io;
  {{
    uma::client uma(sys, {{.backend = {{.choice = uma::backend_choice::host}}}});
    uma::asio::bridge bridge(sys, uma.handle(), io);
    auto work = [&]() -> net::awaitable<void> {{
{body}
      co_return;
    }};
    net::co_spawn(io, work, net::detached);
    io.run();
  }}
"""

INCLUDES = """#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <boost/asio.hpp>
#include <caf/all.hpp>

#include <uma/actors/access_sequence.hpp>
#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/asio_bridge.hpp>
#include <uma/actors/client.hpp>
#include <uma/actors/managed_allocator.hpp>
#include <uma/actors/metrics/metrics_endpoint.hpp>
#include <uma/actors/remote/arbiter/arbiter_member.hpp>
#include <uma/actors/remote/remote_client.hpp>
#include <uma/actors/scheduler_tuning.hpp>
#include <uma/memory/copy.hpp>
#include <uma/messages/register_types.hpp>
"""


def split_top(text):
    """(includes, rest): a block's #include lines go to the top of the translation unit."""
    includes = [line for line in text.split("\n") if line.startswith("#include")]
    rest = [line for line in text.split("\n") if not line.startswith("#include")]
    return includes, "\n".join(rest)


def with_final_return(text):
    """`text` with `return 0;` before main's closing brace: main alone may flow off its end, and
    the block's main becomes an ordinary function here."""
    start = text.find("int main(")
    if start < 0:
        return text
    depth, i, opened = 0, text.index("{", start), False
    while i < len(text):
        c = text[i]
        if c in "\"'":  # skip a literal
            j = i + 1
            while j < len(text) and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j
        elif text.startswith("//", i):
            i = text.find("\n", i) if "\n" in text[i:] else len(text)
        elif c == "{":
            depth, opened = depth + 1, True
        elif c == "}":
            depth -= 1
            if opened and depth == 0:
                return text[:i] + "  return 0;\n" + text[i:]
        i += 1
    return text


def cpp_unit(block):
    """(includes, namespace-scope code, run function name or None) of one C++ block."""
    includes, text = split_top(block.text)
    ns = f"doc_{block.ident}"
    served = SERVED_PRELUDE if block.serve else ""
    if block.mode == "run":
        text = with_final_return(text)
        code = f"namespace {ns} {{\n#define main doc_main\n{text}\n#undef main\n}}  // namespace {ns}\n"
        call = f"{ns}::doc_main"
        return includes, code, call
    if block.harness == "split_main":
        lines = text.split("\n")
        last = max((i for i, line in enumerate(lines) if line.startswith("};")), default=-1)
        decls, body = "\n".join(lines[:last + 1]), "\n".join(lines[last + 1:])
        code = (f"namespace {ns} {{\n{decls}\n"
                f"int doc_main() {{\n{served}{body}\n  return 0;\n}}\n}}  // namespace {ns}\n")
        return includes, code, f"{ns}::doc_main"
    if block.harness == "with_config":
        code = (f"namespace {ns} {{\nnamespace net = boost::asio;\n"
                f"int doc_main() {{\n{served}  doc_config cfg;\n{text}\n  return 0;\n}}\n"
                f"}}  // namespace {ns}\n")
        return includes, code, f"{ns}::doc_main"
    if block.harness == "in_coroutine":
        inner = COROUTINE.format(body=text)
    else:
        inner = HARNESSES[block.harness].format(body=text)
    code = (f"namespace {ns} {{\nnamespace net = boost::asio;\n"
            f"int doc_main() {{\n{served}  doc_config cfg;\n  caf::actor_system sys{{cfg}};\n{inner}"
            f"  return 0;\n}}\n}}  // namespace {ns}\n")
    return includes, code, f"{ns}::doc_main"


def write_cpp(root, out):
    blocks = [b for b in all_blocks(root) if b.lang == "cpp" and b.mode in ("run", "fragment",
                                                                           "compile")]
    includes, codes, table = set(), [], []
    for b in blocks:
        inc, code, call = cpp_unit(b)
        includes.update(inc)
        codes.append(f"// {b.id} ({b.marker})\n#line {b.line + 1} \"{b.path}\"\n{code}")
        runs = "true" if b.mode != "compile" else "false"
        table.append(f'    {{"{b.id}", {runs}, [] {{ return {call}(); }}}},')
    text = ("// Generated by tools/doc_blocks.py from README.md and docs/*.md: do not edit.\n"
            "// NOLINTBEGIN\n" + INCLUDES + "".join(f"{line}\n" for line in sorted(includes - set(INCLUDES.split("\n"))))
            + "\n" + PRELUDE + "\n".join(codes) + RUNNER.replace("@TABLE@", "\n".join(table)))
    out = Path(out)
    if not out.exists() or out.read_text() != text:
        out.write_text(text)


RUNNER = """
#include <cstring>
#include <string_view>

namespace {
struct doc_block {
  std::string_view id;
  bool runs;
  int (*fn)();
};
const doc_block doc_blocks[] = {
@TABLE@
};
}  // namespace

// `doc_blocks ID` runs one block (as its CTest does); `doc_blocks --list` lists the runnable ones.
int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const auto& b : doc_blocks)
      if (b.runs)
        std::printf("%s\\n", std::string(b.id).c_str());
    return 0;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s BLOCK-ID | --list\\n", argv[0]);
    return 2;
  }
  for (const auto& b : doc_blocks)
    if (b.id == argv[1]) {
      if (!b.runs) {
        std::fprintf(stderr, "%s is compiled only\\n", argv[1]);
        return 2;
      }
      const int rc = b.fn();
      return rc;
    }
  std::fprintf(stderr, "no C++ block %s\\n", argv[1]);
  return 2;
}
// NOLINTEND
"""


# -- transcripts ---------------------------------------------------------------------------------

TRANSCRIPT_RULES = """A transcript's `$ COMMAND` lines run one after another in the block's scratch folder (a
line ending in a backslash continues on the next). The lines shown under a command are its
expected output (stdout and stderr together): a shown line matches an output line when they are
equal, except that each run of digits stands for any run of digits (ports, pids, sizes, ages)
and `...` inside a line for any text; a line of just `...` stands for any number of lines.
The shown lines between two `...` lines must appear consecutively, and those runs in order. A
command shown without output must exit 0; none may die of a signal."""


def transcript_steps(text):
    """[(command, [shown output lines])] of a console transcript."""
    steps, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command += "\n" + lines[i]
            steps.append((command, []))
        elif steps:
            steps[-1][1].append(line.rstrip())
        i += 1
    return steps


def shown_pattern(line):
    """A shown output line as a regular expression (TRANSCRIPT_RULES)."""
    parts = re.split(r"(\d+|\.\.\.)", line)
    return re.compile("".join(r"\d+" if p.isdigit() else ".*" if p == "..." else re.escape(p)
                              for p in parts))


def unmatched(shown, output):
    """The first shown line (with its context) not found in `output` as TRANSCRIPT_RULES say,
    or None when all are."""
    runs, run = [], []
    for line in shown:
        if line.strip() == "...":
            runs.append(run)
            run = []
        elif line or run:
            run.append(line)
    runs.append(run)
    out, pos = [line.rstrip() for line in output.split("\n")], 0
    for run in (r for r in runs if r):
        patterns = [shown_pattern(line) for line in run]
        start = next((i for i in range(pos, len(out) - len(run) + 1)
                      if all(p.fullmatch(out[i + k]) for k, p in enumerate(patterns))), None)
        if start is None:
            return run[0] if len(run) == 1 else f"{run[0]} (and the {len(run) - 1} after it)"
        pos = start + len(run)
    return None


def run_transcript(block, scratch, env):
    for command, shown in transcript_steps(block.text):
        print(f"$ {command}", flush=True)
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=scratch, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=120, check=False)
        print(done.stdout, end="", flush=True)
        if done.returncode < 0 or done.returncode >= 128:
            print(f"FAILED: `{command}` died (status {done.returncode})", file=sys.stderr)
            return 1
        if not any(line.strip() for line in shown) and done.returncode != 0:
            print(f"FAILED: `{command}` exited {done.returncode}; the transcript shows no output, "
                  "so it must exit 0", file=sys.stderr)
            return 1
        missing = unmatched(shown, done.stdout)
        if missing is not None:
            print(f"FAILED: `{command}` (exit {done.returncode}) did not print the transcript's "
                  f"line\n  {missing}", file=sys.stderr)
            return 1
    return 0


# -- a uma serve for the blocks marked `serve` ---------------------------------------------------

# As docs/cli.md's serve transcript starts it, with its sockets in the block's scratch folder
# (`{socket}`; the operator socket is beside it, "{socket}.operator") and a metrics endpoint on
# port 0 (a free one; the server prints what it got).
SERVE_ARGS = ["serve", "--socket", "{socket}", "--backend", "host", "--quota", "1073741824",
              "--metrics", "127.0.0.1:0", "--arbiter-total", "0:4000000000"]
SERVE_DEADLINE_S = 60
# A Unix socket's path must fit sockaddr_un.sun_path (108 bytes with its terminating zero).
SOCKET_PATH_MAX = 107
# What the server prints once it serves (tools/cli_serve.cpp), and the variable each one sets.
ANNOUNCEMENTS = {
    "UMA_SERVER": re.compile(r"^uma serve: listening on (unix:\S+) \(backend host, pid \d+\)$"),
    "UMA_OPERATOR": re.compile(r"^uma serve: operator socket (unix:\S+)$"),
    "UMA_METRICS": re.compile(r"^uma serve: metrics on http://(\S+)/metrics$"),
}
STOPPED = re.compile(r"^uma serve: stopping after SIGTERM: ")


class ServeError(RuntimeError):
    """The harness's uma serve did not start, announce itself or stop as it must."""


def serve_args(folder):
    """SERVE_ARGS for a server whose sockets live in `folder`, and the variables the block will
    read, as the server must announce them."""
    socket = str(Path(folder).absolute() / "uma.sock")
    if len(socket) + len(".operator") > SOCKET_PATH_MAX:
        raise ServeError(f"the scratch folder's path is too long for a Unix socket: {socket} "
                         f"(a socket path has at most {SOCKET_PATH_MAX} bytes; set TMPDIR shorter)")
    args = [a.replace("{socket}", socket) for a in SERVE_ARGS]
    return args, {"UMA_SERVER": f"unix:{socket}", "UMA_OPERATOR": f"unix:{socket}.operator"}


def announcement(line):
    """(variable, value) that one line of the server's stdout announces, or None."""
    for key, pattern in ANNOUNCEMENTS.items():
        m = pattern.match(line)
        if m:
            return key, m.group(1)
    return None


def _die_with_parent():
    """In the server's child process: SIGTERM when this script dies, even of SIGKILL (a CTest
    timeout), so no server outlives its test (Linux's PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)


def _read_lines(stream, sink):
    for line in stream:
        sink.put(line.rstrip("\n"))
    sink.put(None)


def _await_announcements(proc, lines, stderr, expected):
    """Every ANNOUNCEMENTS variable from the server's stdout, within the deadline; those in
    `expected` must be announced with the value asked for (the sockets it was given)."""
    found, deadline = {}, time.monotonic() + SERVE_DEADLINE_S
    while len(found) < len(ANNOUNCEMENTS):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            missing = ", ".join(sorted(set(ANNOUNCEMENTS) - set(found)))
            raise ServeError(f"uma serve did not announce {missing} within {SERVE_DEADLINE_S} s")
        try:
            line = lines.get(timeout=remaining)
        except queue.Empty:
            continue
        if line is None:
            proc.wait()
            raise ServeError(f"uma serve ended (exit {proc.returncode}) before it was ready:\n"
                             + "".join(stderr))
        print(f"[server] {line}", flush=True)
        got = announcement(line)
        if got is None:
            continue
        key, value = got
        if key in expected and value != expected[key]:
            raise ServeError(f"uma serve announced {value} for {key}, not the {expected[key]} "
                             "it was given")
        found[key] = value
    return found


@contextlib.contextmanager
def serving(uma, folder):
    """A `uma serve` (SERVE_ARGS) in `folder` for one block: yields the variables the block reads;
    stops it with SIGTERM afterwards and raises ServeError unless it exits 0 saying so. Whatever
    happens, the server does not outlive this."""
    folder.mkdir()
    args, expected = serve_args(folder)
    proc = subprocess.Popen([str(uma)] + args, cwd=folder, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_die_with_parent)
    lines, stderr = queue.Queue(), []
    threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True).start()
    err_reader = threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True)
    err_reader.start()
    try:
        yield _await_announcements(proc, lines, stderr, expected)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=SERVE_DEADLINE_S)
        except subprocess.TimeoutExpired:
            raise ServeError(f"uma serve did not stop within {SERVE_DEADLINE_S} s of SIGTERM") \
                from None
        err_reader.join(timeout=SERVE_DEADLINE_S)
        if proc.returncode != 0 or not any(STOPPED.match(line) for line in stderr):
            raise ServeError(f"uma serve exited {proc.returncode} after SIGTERM, not 0 with its "
                             "'stopping after SIGTERM' line")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err_reader.join(timeout=5)
        print("".join(f"[server stderr] {line}" for line in stderr), end="", flush=True)


# -- run one block -------------------------------------------------------------------------------

def block_env(scratch, uma, python_paths):
    """The environment of a block: `uma` first on PATH; python/ and the stand-in frameworks
    importable; the folder of UMA_LIBRARY on LD_LIBRARY_PATH (blocks name "libuma_c.so", as
    an installed uma's users do)."""
    bindir = Path(scratch) / "bin"
    bindir.mkdir()
    (bindir / "uma").symlink_to(Path(uma).resolve())
    env = dict(os.environ)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(p).resolve()) for p in python_paths] + [env.get("PYTHONPATH", "")])
    if env.get("UMA_LIBRARY"):
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            [str(Path(env["UMA_LIBRARY"]).resolve().parent), env.get("LD_LIBRARY_PATH", "")])
    return env


def runnable(block):
    return (block.mode in ("run", "fragment") if block.lang == "cpp"
            else block.mode in ("run", "transcript") if block.lang == "sh"
            else block.mode == "run" and block.lang == "python")


def run_block(root, ident, uma, python_paths, cpp_runner):
    matches = [b for b in all_blocks(root) if b.id == ident]
    if not matches:
        print(f"no block {ident}", file=sys.stderr)
        return 2
    b = matches[0]
    if not runnable(b) or (b.lang == "cpp" and not cpp_runner):
        print(f"{ident} is not a runnable block ({b.marker}; C++ needs --cpp-runner)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="uma-doc-") as scratch:
        env = block_env(scratch, uma, python_paths)
        print(f"--- {ident} ({b.lang}, {b.marker}) in {scratch}:\n{b.text}\n---", flush=True)
        try:
            with (serving(uma, Path(scratch) / "server") if b.serve
                  else contextlib.nullcontext({})) as served:
                env.update(served)
                if b.mode == "transcript":
                    rc = run_transcript(b, scratch, env)
                else:
                    cmd = ([str(Path(cpp_runner).resolve()), ident] if b.lang == "cpp"
                           else ["bash", "-euo", "pipefail", "-c", b.text] if b.lang == "sh"
                           else [sys.executable, "-c", b.text])
                    rc = subprocess.call(cmd, cwd=scratch, env=env)
        except ServeError as error:
            print(f"FAILED: {error}", file=sys.stderr)
            return 1
        return rc


def self_test_serve():
    """(failed, total) of the serve harness's cases: what it reads from the server's stdout and
    the sockets it gives the server."""
    failed = 0
    # What the server announces (tools/cli_serve.cpp's lines): the tenants' socket, the operator
    # socket and the metrics address; a TCP listener or a session log line sets nothing.
    lines = {
        "uma serve: listening on unix:/tmp/d/uma.sock (backend host, pid 29127)":
            ("UMA_SERVER", "unix:/tmp/d/uma.sock"),
        "uma serve: operator socket unix:/tmp/d/uma.sock.operator":
            ("UMA_OPERATOR", "unix:/tmp/d/uma.sock.operator"),
        "uma serve: metrics on http://127.0.0.1:9464/metrics": ("UMA_METRICS", "127.0.0.1:9464"),
        "uma serve: listening on 127.0.0.1:4242 with mutual TLS": None,
        "uma serve: listening on 127.0.0.1:45113 (backend host, pid 29127)": None,
        "uma serve: session 1 opened by uid 1000": None,
    }
    for line, expected in lines.items():
        got = announcement(line)
        if got != expected:
            failed += 1
            print(f"FAILED: announcement {line!r}: expected {expected!r}, got {got!r}")
    # The server is given its sockets in the scratch folder, and a path sun_path cannot hold is
    # refused before anything starts.
    args, expected = serve_args("/tmp/d")
    checks = [(args[args.index("--socket") + 1] == "/tmp/d/uma.sock"
               and expected == {"UMA_SERVER": "unix:/tmp/d/uma.sock",
                                "UMA_OPERATOR": "unix:/tmp/d/uma.sock.operator"},
               f"serve_args('/tmp/d') gave {args}, {expected}")]
    try:
        serve_args("/" + "d" * 100)
        checks.append((False, "serve_args accepted a socket path over 107 bytes"))
    except ServeError as error:
        checks.append(("too long for a Unix socket" in str(error), str(error)))
    for ok, what in checks:
        if not ok:
            failed += 1
            print(f"FAILED: {what}")
    return failed, len(lines) + len(checks)


def self_test():
    """The check refuses what it must: an unmarked block, a bare fence, a reasonless skip, an
    unknown harness; and accepts the marked forms."""
    cases = {
        "```cpp\nint x;\n```\n": "without a <!-- doc-test",
        "```\nout\n```\n": "a fence without a language",
        "<!-- doc-test: skip -->\n```sh\nls\n```\n": "skip without a reason",
        "<!-- doc-test: fragment nowhere -->\n```cpp\nint x;\n```\n": "unknown harness",
        "<!-- doc-test: compile with_client -->\n```cpp\nint x;\n```\n": "compile without",
        "```rust\nfn main() {}\n```\n": "unknown language",
        "<!-- doc-test: transcript -->\n```console\nls\n```\n": "without a '$ COMMAND'",
        "<!-- doc-test: transcript -->\n```python\n$ ls\n```\n": "for shell (console) blocks",
        "<!-- doc-test: compile with_client serve (why) -->\n```cpp\nint x;\n```\n":
            "'serve' is for run, fragment and transcript",
        "<!-- doc-test: run serve -->\n```cpp\nint main() {}\n```\n": "is a fragment",
        "<!-- doc-test: run with_client -->\n```sh\nls\n```\n": "takes no harness",
        "<!-- doc-test: run -->\n```cpp\nint main() {}\n```\n"
        "<!-- doc-test: fragment split_main serve -->\n```cpp\nint x;\n```\n"
        "<!-- doc-test: run serve -->\n```sh\nls\n```\n"
        "<!-- doc-test: transcript serve -->\n```console\n$ ls\nout\n```\n"
        "<!-- doc-test: skip (why) -->\n```python\nimport x\n```\n```text\nout\n```\n": None,
    }
    failed = 0
    for text, expected in cases.items():
        with tempfile.TemporaryDirectory() as root:
            (Path(root) / "docs").mkdir()
            (Path(root) / "README.md").write_text(text)
            found = problems(root)
            ok = (not found) if expected is None else any(expected in p for p in found)
            if not ok:
                failed += 1
                print(f"FAILED: {text!r}: expected {expected!r}, got {found}")
    # The transcript rules: numbers and `...` vary, the words do not; runs keep their order.
    output = "server 127.0.0.1:45113: 2 region(s)\nregion 1 of generation 1: 4096 bytes\nend"
    matches = {
        ("server 127.0.0.1:4242: 0 region(s)",): None,
        ("server 127.0.0.1:4242: 0 region(s)", "...", "end"): None,
        ("region 7 of ...", "end"): None,
        ("server 127.0.0.1:4242: 0 regions",): "server 127.0.0.1:4242: 0 regions",
        ("end", "...", "region 1 of generation 1: 4096 bytes"): "region 1 of generation 1: 4096 bytes",
        ("server 1.2.3.4:5: 2 region(s)", "end"): "server 1.2.3.4:5: 2 region(s) (and the 1 after it)",
    }
    for shown, expected in matches.items():
        got = unmatched(list(shown), output)
        if got != expected:
            failed += 1
            print(f"FAILED: transcript {shown!r}: expected {expected!r}, got {got!r}")
    serve_failed, serve_total = self_test_serve()
    failed += serve_failed
    total = len(cases) + len(matches) + serve_total
    print(f"{total - failed}/{total} self-test cases passed")
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check").add_argument("root")
    sub.add_parser("self-test")
    p = sub.add_parser("cpp")
    p.add_argument("root")
    p.add_argument("out")
    p = sub.add_parser("list")
    p.add_argument("root")
    p.add_argument("lang", choices=["sh", "python", "cpp"])
    p = sub.add_parser("run")
    p.add_argument("root")
    p.add_argument("id")
    p.add_argument("--uma", required=True)
    p.add_argument("--python-path", action="append", default=[])
    p.add_argument("--cpp-runner", help="the built uma_doc_blocks (C++ blocks)")
    args = parser.parse_args()
    if args.command == "self-test":
        return self_test()
    if args.command == "check":
        found = problems(args.root)
        for line in found:
            print(line)
        blocks = all_blocks(args.root)
        code = [b for b in blocks if b.lang]
        print(f"{len(blocks)} blocks, {len(code)} code blocks: "
              f"{sum(runnable(b) for b in code)} run "
              f"({sum(b.serve for b in code)} against a uma serve), "
              f"{sum(b.mode == 'compile' for b in code)} compiled only, "
              f"{sum(b.mode == 'skip' for b in code)} skipped with a reason; "
              f"{len(found)} problem(s)")
        return 1 if found else 0
    if args.command == "cpp":
        write_cpp(args.root, args.out)
        return 0
    if args.command == "list":
        for b in all_blocks(args.root):
            if b.lang == args.lang and runnable(b):
                print(b.id)
        return 0
    # A CTest timeout's SIGTERM unwinds (the server is stopped) rather than ending us at once.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    return run_block(args.root, args.id, args.uma, args.python_path, args.cpp_runner)


if __name__ == "__main__":
    sys.exit(main())
