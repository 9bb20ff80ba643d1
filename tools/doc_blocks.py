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
  <!-- doc-test: skip (reason) -->            not run; the reason says why

Blocks of other languages (text, json, yaml, cmake: outputs, diagrams, configuration) need no
marker. A code block without a marker, a fence without a language, or a marker the harness does
not know fails `check`.

  doc_blocks.py check ROOT                       the markers (a CTest)
  doc_blocks.py cpp ROOT OUT.cpp                 one translation unit of every C++ block
  doc_blocks.py list ROOT LANG                   the ids of the runnable blocks of LANG
  doc_blocks.py run ROOT ID --uma PATH [...]     run one sh or python block
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
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
        if self.marker is None:
            return
        m = re.match(r"^(run|skip|fragment|compile)\b\s*([^\s(]*)\s*(?:\((.*)\))?\s*$", self.marker)
        if not m:
            self.error = f"unknown marker '{self.marker}'"
            return
        self.mode, self.harness, self.reason = m.group(1), m.group(2) or None, m.group(3)
        if self.mode == "skip" and not (self.reason or "").strip():
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
    "with_client": """  [[maybe_unused]] uma::client uma(sys, {{.choice = uma::backend_choice::host}});
  [[maybe_unused]] auto supervisor_or_allocator_handle = uma.handle();
  [[maybe_unused]] std::size_t n = 1024;
  using namespace std::chrono_literals;
{body}
""",
    # config (an allocator_config for the host backend), n (a count of floats).
    "with_residency": """  [[maybe_unused]] uma::allocator_config config{{.choice = uma::backend_choice::host}};
  [[maybe_unused]] std::size_t n = 1024;
{body}
""",
    # c (a client), chunks (eight refs), passes, stream, and stand-ins for a kernel launch and
    # cudaStreamSynchronize (the block's CUDA work, which the host backend has none of).
    "with_chunks": """  uma::client c(sys, {{.choice = uma::backend_choice::host}});
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
  supervised.allocator.choice = uma::backend_choice::host;
  auto sup = uma::spawn_supervisor(sys, supervised);
  using namespace std::chrono_literals;
{body}
""",
    # A coroutine with net (boost::asio), bridge (over a host client) and an io_context it runs on.
    "in_coroutine": None,
    # cfg (a config with uma's types) and net (boost::asio) only: the block makes its own system.
    "with_config": None,
}

COROUTINE = """  net::io_context io;
  {{
    uma::client uma(sys, {{.choice = uma::backend_choice::host}});
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
#include <cstdio>
#include <exception>
#include <iostream>
#include <vector>

#include <boost/asio.hpp>
#include <caf/all.hpp>

#include <uma/actors/access_sequence.hpp>
#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/asio_bridge.hpp>
#include <uma/actors/client.hpp>
#include <uma/actors/managed_allocator.hpp>
#include <uma/actors/metrics_endpoint.hpp>
#include <uma/actors/remote_client.hpp>
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
                f"int doc_main() {{\n{body}\n  return 0;\n}}\n}}  // namespace {ns}\n")
        return includes, code, f"{ns}::doc_main"
    if block.harness == "with_config":
        code = (f"namespace {ns} {{\nnamespace net = boost::asio;\n"
                f"int doc_main() {{\n  doc_config cfg;\n{text}\n  return 0;\n}}\n"
                f"}}  // namespace {ns}\n")
        return includes, code, f"{ns}::doc_main"
    if block.harness == "in_coroutine":
        inner = COROUTINE.format(body=text)
    else:
        inner = HARNESSES[block.harness].format(body=text)
    code = (f"namespace {ns} {{\nnamespace net = boost::asio;\n"
            f"int doc_main() {{\n  doc_config cfg;\n  caf::actor_system sys{{cfg}};\n{inner}"
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


# -- sh and python: run one block ---------------------------------------------------------------

def run_block(root, ident, uma, python_paths):
    matches = [b for b in all_blocks(root) if b.id == ident]
    if not matches:
        print(f"no block {ident}", file=sys.stderr)
        return 2
    b = matches[0]
    if b.mode != "run" or b.lang not in ("sh", "python"):
        print(f"{ident} is not a runnable sh or python block ({b.marker})", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="uma-doc-") as scratch:
        bindir = Path(scratch) / "bin"
        bindir.mkdir()
        (bindir / "uma").symlink_to(Path(uma).resolve())
        env = dict(os.environ)
        env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(p).resolve()) for p in python_paths] + [env.get("PYTHONPATH", "")])
        if b.lang == "sh":
            cmd = ["bash", "-euo", "pipefail", "-c", b.text]
        else:
            cmd = [sys.executable, "-c", b.text]
        print(f"--- {ident} ({b.lang}) in {scratch}:\n{b.text}\n---", flush=True)
        return subprocess.call(cmd, cwd=scratch, env=env)


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
        "<!-- doc-test: run -->\n```cpp\nint main() {}\n```\n"
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
    print(f"{len(cases) - failed}/{len(cases)} self-test cases passed")
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
              f"{sum(b.mode in ('run', 'fragment') for b in code)} run, "
              f"{sum(b.mode == 'compile' for b in code)} compiled only, "
              f"{sum(b.mode == 'skip' for b in code)} skipped with a reason; "
              f"{len(found)} problem(s)")
        return 1 if found else 0
    if args.command == "cpp":
        write_cpp(args.root, args.out)
        return 0
    if args.command == "list":
        for b in all_blocks(args.root):
            if b.lang == args.lang and b.mode in (("run", "fragment") if args.lang == "cpp"
                                                  else ("run",)):
                print(b.id)
        return 0
    return run_block(args.root, args.id, args.uma, args.python_path)


if __name__ == "__main__":
    sys.exit(main())
