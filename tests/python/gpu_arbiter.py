#!/usr/bin/env python3
"""PyTorch under uma's global install joining a node's arbiter, on a real GPU (the GPU machine):
a `uma serve --backend cuda --arbiter-total 0:BYTES` child, a PyTorch process that allocates
tensors and joins it, and a second member of higher priority that lowers its grant. The newest
blocks are spilled to the host (preferred location host, last prefetched to the host, as the
driver reports them) with their contents intact and still usable; a raised grant brings them back
to the device; uma's residency budget follows every grant. Skips, saying why, where torch or a
device is missing.

    UMA_LIBRARY=.../libuma_c.so python3 tests/python/gpu_arbiter.py --uma-bin .../uma -v
"""

import argparse
import importlib.util
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import MiB, library_path, run_fresh  # noqa: E402

QUOTA = 8 << 30  # the GPU machine's rule: stay far below the card's memory
TOTAL = int(os.environ.get("UMA_ARBITER_TOTAL", 4 << 30))  # --arbiter-total 0:TOTAL

CHILD = """
import ctypes, json, sys, time
import torch, uma_c, uma_torch
uma_torch.install(@LIBRARY@, quota_bytes=@QUOTA@)
if not torch.cuda.is_available():
    print(json.dumps(dict(skip="no usable CUDA device"))); sys.exit(0)
MiB = 1 << 20
libcuda = ctypes.CDLL("libcuda.so.1")
get = libcuda.cuMemRangeGetAttribute
get.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint64, ctypes.c_size_t]
PREFERRED, LAST_PREFETCH = 2, 4  # CU_MEM_RANGE_ATTRIBUTE_*: -1 the host, -2 none
def where(t):
    out = []
    for attribute in (PREFERRED, LAST_PREFETCH):
        value = ctypes.c_int(0)
        status = get(ctypes.byref(value), 4, attribute, t.untyped_storage().data_ptr(),
                     t.untyped_storage().nbytes())
        out.append(value.value if status == 0 else f"CUresult {status}")
    return out
def budget():
    return uma_torch.residency()["devices"][0]["budget_bytes"]
# Oldest first: the weights, the optimizer's state, the newest activations.
sizes = {"a": 256, "b": 256, "c": 512}
tensors = {k: torch.full((n * MiB // 4,), float(i + 1), device="cuda")
           for i, (k, n) in enumerate(sizes.items())}
torch.cuda.synchronize()
sums = {k: float(t.sum()) for k, t in tensors.items()}
out = {"sizes": sizes}
member = uma_torch.join_arbiter(@TARGET@, "torch", wanted_bytes=@TOTAL@)
out["granted"] = member.wait_budget(at_least=@TOTAL@)
out["budget_at_grant"] = budget()
before = uma_torch.spilled_bytes()
other = uma_c.Allocator.create(@LIBRARY@, backend="cuda", quota_bytes=1 << 30)
started = time.perf_counter()
big = other.join_arbiter(@TARGET@, "big", wanted_bytes=@TOTAL@ - 600 * MiB, priority=10)
out["lowered"] = member.wait_budget(at_most=600 * MiB)
out["shrink_ms"] = (time.perf_counter() - started) * 1000
out["budget_lowered"] = budget()
out["spilled"] = uma_torch.spilled_bytes() - before
out["where_lowered"] = {k: where(t) for k, t in tensors.items()}
out["sums_lowered"] = {k: float(t.sum()) for k, t in tensors.items()}
tensors["c"].mul_(2); torch.cuda.synchronize()  # written over the link
out["c_doubled"] = float(tensors["c"].sum())
rows = member.report()["devices"][0]["members"]
out["resident"] = [r["resident_bytes"] for r in rows if r["tenant"].endswith("/torch")]
big.leave()
out["raised"] = member.wait_budget(at_least=@TOTAL@)
out["where_raised"] = {k: where(t) for k, t in tensors.items()}
out["sums_raised"] = {k: float(t.sum()) for k, t in tensors.items()}
out["sums"] = sums
member.leave(); other.close()
print(json.dumps(out))
"""


class Node:
    """`uma serve --backend cuda --arbiter-total 0:TOTAL` on a private socket; tenant "big" of
    this uid may ask priority 10."""

    def __init__(self, cli):
        self.dir = tempfile.mkdtemp(prefix="uma-gpu-arbiter-")
        self.target = f"unix:{self.dir}/s"
        self.process = subprocess.Popen(
            [cli, "serve", "--backend", "cuda", "--arbiter-total", f"0:{TOTAL}",
             "--arbiter-policy", f"uid {os.getuid()}/big:0:0:10:1", "--socket", f"{self.dir}/s"],
            stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 1)
            if ready and "listening on" in self.process.stdout.readline():
                return
        self.stop()
        raise AssertionError("uma serve did not say it is listening")

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class ArbiterOnTheGpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if importlib.util.find_spec("torch") is None:
            raise unittest.SkipTest("torch is not installed here")
        cli = os.environ.get("UMA_CLI")
        if not cli:
            raise unittest.SkipTest("no uma tool: pass --uma-bin PATH (or set UMA_CLI)")
        cls.node = Node(cli)

    @classmethod
    def tearDownClass(cls):
        cls.node.stop()

    def test_a_lowered_grant_spills_the_newest_tensors_and_a_raised_one_brings_them_back(self):
        code = (CHILD.replace("@LIBRARY@", repr(library_path())).replace("@QUOTA@", str(QUOTA))
                .replace("@TARGET@", repr(self.node.target)).replace("@TOTAL@", str(TOTAL)))
        r, _ = run_fresh(code, timeout=600)
        if "skip" in r:
            self.skipTest(r["skip"])
        print(f"\nshrink to 600 MiB acknowledged in {r['shrink_ms']:.1f} ms; {r}", flush=True)
        self.assertEqual(r["granted"], TOTAL)
        self.assertEqual(r["budget_at_grant"], TOTAL)
        self.assertEqual(r["lowered"], 600 * MiB)
        self.assertEqual(r["budget_lowered"], 600 * MiB)
        self.assertEqual(r["spilled"], 512 * MiB)  # the newest tensor alone: 512 MiB fit
        self.assertEqual(r["where_lowered"]["c"], [-1, -1])  # preferred and prefetched: host
        self.assertNotEqual(r["where_lowered"]["a"][0], -1)  # the oldest stay on the device
        self.assertEqual(r["sums_lowered"], r["sums"])  # contents kept
        self.assertEqual(r["c_doubled"], 2 * r["sums"]["c"])
        self.assertEqual(len(r["resident"]), 1)
        self.assertLessEqual(r["resident"][0], 600 * MiB)
        self.assertGreaterEqual(r["resident"][0], 512 * MiB)  # a and b, placed
        self.assertEqual(r["raised"], TOTAL)
        self.assertEqual(r["where_raised"]["c"], [-2, 0])  # advice undone, prefetched back
        self.assertEqual(r["sums_raised"]["a"], r["sums"]["a"])
        self.assertEqual(r["sums_raised"]["c"], 2 * r["sums"]["c"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uma-bin", help="the built uma tool (default: $UMA_CLI)")
    args, rest = parser.parse_known_args()
    if args.uma_bin:
        os.environ["UMA_CLI"] = os.path.abspath(args.uma_bin)
    unittest.main(argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
