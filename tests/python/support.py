"""Shared helpers of the Python suite: where the library and the packages are, and a runner for
code that must start in a fresh process (the default allocator and install() are per process)."""

import json
import os
import subprocess
import sys
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "python"))
FAKES_DIR = os.path.join(HERE, "fakes")
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

import uma_c  # noqa: E402

MiB = 1 << 20


def library_path():
    """libuma_c.so from UMA_LIBRARY (CTest sets it); skips the test without it."""
    path = os.environ.get("UMA_LIBRARY")
    if not path:
        raise unittest.SkipTest("UMA_LIBRARY is not set (run through ctest, or set it to "
                                "the built libuma_c.so)")
    return path


def run_fresh(code, fakes=False, timeout=60):
    """Runs `code` in a new interpreter with python/ (and tests/python/fakes when `fakes`) on
    sys.path; the code prints one JSON line last. Returns (that object, completed process)."""
    path = [PYTHON_DIR] + ([FAKES_DIR] if fakes else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise AssertionError(f"child failed (exit {done.returncode}):\n{done.stdout}\n"
                             f"{done.stderr}")
    return json.loads(lines[-1]), done


def find_stats_object(document):
    """The JSON object holding the counters (it has live_bytes), wherever it is nested."""
    if isinstance(document, dict):
        if "live_bytes" in document:
            return document
        for value in document.values():
            found = find_stats_object(value)
            if found is not None:
                return found
    elif isinstance(document, list):
        for value in document:
            found = find_stats_object(value)
            if found is not None:
                return found
    return None


def load_json(text):
    return json.loads(text)


# The offload suites' model, for the code a fresh process runs (run_fresh): embed, `layers`
# blocks in a ModuleList, a head tied to embed. Blocks are embed, blocks.0 .. blocks.N-1, head
# (its one parameter is embed's weight). Needs `torch` imported first.
OFFLOAD_MODEL = """
class Block(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = torch.nn.Linear(n, n)
        self.proj = torch.nn.Linear(n, n, bias=False)

    def forward(self, x):
        return self.proj(self.fc(x))

class Model(torch.nn.Module):
    def __init__(self, layers=3, n=64, device="cuda"):
        super().__init__()
        self.embed = torch.nn.Linear(n, n, bias=False, device=device)
        self.blocks = torch.nn.ModuleList([Block(n) for _ in range(layers)])
        self.head = torch.nn.Linear(n, n, bias=False, device=device)
        self.head.weight = self.embed.weight

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)
"""
