#!/usr/bin/env python3
"""PyTorch's own checks against uma (issue 36), on the GPU machine: uma pools beside PyTorch's
allocator, PyTorch's memory_stats and snapshots (and _memory_viz) on uma's memory, CUDA graphs
and torch.compile(mode="reduce-overhead") with the model's state in a uma pool, the global
install's refusal to capture, spill instead of OOM at a memory fraction, offload of a model in a
pool. Each case runs in a fresh process. Skips, saying why, without torch or a device.

    UMA_LIBRARY=.../libuma_c.so python3 tests/python/gpu_torch_parity.py -v
"""

import importlib.util
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from support import library_path, run_fresh  # noqa: E402

BENCH_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                         "python")
FINDINGS = os.environ.get("UMA_PARITY_FINDINGS")  # a file to append each case's figures to

PRELUDE = """
import json, sys
sys.path.insert(0, @BENCH_DIR@)
import torch
if not torch.cuda.is_available():
    print(json.dumps(dict(skip="no usable CUDA device"))); sys.exit(0)
"""

# The same allocation sequence under either allocator: sizes of every pool and rounding.
SEQUENCE = """
def sequence(torch):
    keep, sizes = [], [1, 511, 512, 513, 4096, 65536, (1 << 20) - 1, 1 << 20, (1 << 20) + 1,
                       3 << 20, 7 << 20]
    for size in sizes:
        keep.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
    for t in keep[::2]:
        del t
    keep = keep[1::2]
    torch.cuda.synchronize()
    return keep
KEYS = [f"{family}.{pool}.{figure}" for family in ("allocation", "allocated_bytes",
        "requested_bytes", "active", "active_bytes") for pool in ("all", "small_pool",
        "large_pool") for figure in ("current", "peak", "allocated", "freed")]
"""


def child(body):
    code = PRELUDE + body
    return (code.replace("@BENCH_DIR@", repr(BENCH_DIR))
            .replace("@LIBRARY@", repr(library_path())))


def needs_torch():
    if importlib.util.find_spec("torch") is None:
        raise unittest.SkipTest("torch is not installed here")


def record(name, result):
    if FINDINGS:
        with open(FINDINGS, "a", encoding="utf-8") as f:
            f.write(json.dumps({"case": name, **result}) + "\n")


class TorchParity(unittest.TestCase):
    def run_case(self, name, body, timeout=600):
        needs_torch()
        result, done = run_fresh(child(body), timeout=timeout)
        if "skip" in result:
            raise unittest.SkipTest(result["skip"])
        record(name, result)
        if done.stderr.strip():
            print(f"--- {name} stderr (tail):\n{done.stderr[-2000:]}", file=sys.stderr)
        return result

    def test_pool_beside_pytorch(self):
        r = self.run_case("pool", """
import common, uma_torch
warm = torch.ones(1 << 20, device="cuda")  # CUDA started before uma: no install needed
pool = uma_torch.pool(label="state", library=@LIBRARY@, quota_bytes=8 << 30)
with pool:
    x = torch.arange(1 << 22, dtype=torch.float32, device="cuda")
y = torch.ones(1 << 22, device="cuda")
out = {"x_managed": common.count_managed([x.data_ptr()]),
       "y_managed": common.count_managed([y.data_ptr()])}
out["sum_ok"] = float((x * 2).sum()) == float(2 * (((1 << 22) - 1) * (1 << 22) // 2))
segments = pool.snapshot()
out["pool_segments"] = len(segments)
out["pool_bytes"] = sum(s["total_size"] for s in segments)
out["owns"] = [pool.owns(x), pool.owns(y)]
out["uma_live_before"] = pool.stats()["live_bytes"]
stats = torch.cuda.memory_stats()
out["torch_reserved"] = stats["reserved_bytes.all.current"]
del x
torch.cuda.synchronize()
out["trimmed"] = pool.empty_cache()
out["uma_live_kept"] = pool.stats()["live_bytes"]  # PyTorch keeps a live pool's free segments
out["pool_segments_kept"] = len(pool.snapshot())
out["closed_trim"] = pool.close()
out["uma_live_after"] = pool.stats()["live_bytes"]
print(json.dumps(out))
""")
        managed = list(r["x_managed"].values())
        self.assertTrue(managed and all(v == 1 for v in managed), r)
        self.assertTrue(all(v == 0 for v in r["y_managed"].values()), r)
        self.assertTrue(r["sum_ok"], r)
        self.assertGreaterEqual(r["pool_bytes"], 16 << 20, r)
        self.assertEqual(r["owns"], [True, False], r)
        self.assertGreaterEqual(r["uma_live_before"], 16 << 20, r)
        self.assertGreaterEqual(r["torch_reserved"], r["pool_bytes"], r)
        self.assertEqual(r["pool_segments_kept"], 1, r)
        self.assertLess(r["uma_live_after"], r["uma_live_before"], r)

    def _stats_under(self, install):
        setup = ("import uma_torch\numa_torch.install(@LIBRARY@, quota_bytes=8 << 30)\n"
                 if install else "")
        tools = "uma_torch" if install else "torch.cuda"
        return self.run_case("stats_" + ("uma" if install else "native"), setup + SEQUENCE + f"""
tools = {tools}
keep = sequence(torch)
first = dict(tools.memory_stats())
tools.reset_peak_memory_stats()
after_reset = dict(tools.memory_stats())
more = torch.empty(5 << 20, dtype=torch.uint8, device="cuda"); del more
torch.cuda.synchronize()
later = dict(tools.memory_stats())
max_allocated, allocated = tools.max_memory_allocated(), tools.memory_allocated()
# A block of 10 MiB or more gets a segment rounded up to 2 MiB; PyTorch leaves a remainder of
# 1 MiB or less unsplit and counts it as allocated, uma counts the rounded request.
big = torch.empty(25 << 20, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
big_allocated = tools.memory_stats()["allocated_bytes.large_pool.current"] - \
    later["allocated_bytes.large_pool.current"]
out = {{"first": {{k: first.get(k) for k in KEYS}},
       "after_reset": {{k: after_reset.get(k) for k in KEYS}},
       "later": {{k: later.get(k) for k in KEYS}},
       "max_allocated": max_allocated, "allocated": allocated,
       "reserved": tools.memory_reserved(), "num_ooms": first.get("num_ooms"),
       "keys": sorted(first), "big_allocated": big_allocated}}
print(json.dumps(out))
""")

    def test_memory_stats_match_native(self):
        native = self._stats_under(install=False)
        uma = self._stats_under(install=True)
        for phase in ("first", "after_reset", "later"):
            for key in native[phase]:
                if key.startswith(("active", "allocation", "allocated_bytes", "requested")):
                    self.assertEqual(uma[phase][key], native[phase][key], (phase, key))
        self.assertEqual(uma["max_allocated"], native["max_allocated"])
        self.assertEqual(uma["allocated"], native["allocated"])
        self.assertGreaterEqual(uma["reserved"], uma["allocated"])
        self.assertEqual(uma["num_ooms"], 0)
        self.assertEqual(uma["big_allocated"], 25 << 20)
        self.assertEqual(native["big_allocated"], 26 << 20)  # the documented difference

    def test_snapshot_renders(self):
        r = self.run_case("snapshot_uma", """
import uma_torch
uma_torch.install(@LIBRARY@, quota_bytes=8 << 30)
from torch.cuda import _memory_viz
uma_torch.record_memory_history()
def make_blocks():
    return [torch.empty(n << 20, device="cuda") for n in (1, 2, 3)]
blocks = make_blocks(); del blocks[0]
snap = uma_torch.memory_snapshot()
html_segments = _memory_viz.segment_plot(snap)
html_trace = _memory_viz.trace_plot(snap)
summary = _memory_viz.segsum(snap)
frames = [f["name"] for s in snap["segments"] for b in s["blocks"] for f in b["frames"]]
native_keys = None
print(json.dumps({"segments": len(snap["segments"]),
                  "traces": [t["action"] for t in snap["device_traces"][0]],
                  "html": [len(html_segments), len(html_trace)], "summary": len(summary),
                  "has_frame": "make_blocks" in frames,
                  "segment_keys": sorted(snap["segments"][0]),
                  "block_keys": sorted(snap["segments"][0]["blocks"][0])}))
""")
        native = self.run_case("snapshot_native", """
torch.cuda.memory._record_memory_history()
blocks = [torch.empty(n << 20, device="cuda") for n in (1, 2, 3)]; del blocks[0]
snap = torch.cuda.memory._snapshot()
print(json.dumps({"segment_keys": sorted(snap["segments"][0]),
                  "block_keys": sorted(snap["segments"][0]["blocks"][0]),
                  "trace_keys": sorted(snap["device_traces"][0][0])}))
""")
        self.assertEqual(r["segments"], 2, r)
        self.assertEqual(r["traces"].count("alloc"), 3, r)
        self.assertIn("free_completed", r["traces"], r)
        self.assertTrue(all(n > 1000 for n in r["html"]), r)
        self.assertTrue(r["has_frame"], r)
        self.assertLessEqual(set(native["block_keys"]), set(r["block_keys"]) | {"frames"},
                             (native, r))
        self.assertLessEqual(set(r["segment_keys"]), set(native["segment_keys"]), (native, r))

    def test_cuda_graph_with_state_in_pool(self):
        r = self.run_case("graphs_pool", """
import uma_torch
torch.manual_seed(0)
pool = uma_torch.pool(label="weights", library=@LIBRARY@, quota_bytes=8 << 30)
with pool:
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 1024)).cuda()
params_in_pool = all(pool.owns(p) for p in model.parameters())
static_in = torch.randn(64, 1024, device="cuda")
side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side), torch.no_grad():
    for _ in range(3):
        model(static_in)
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
with torch.no_grad(), torch.cuda.graph(graph):
    static_out = model(static_in)
errors = []
for _ in range(5):
    data = torch.randn(64, 1024, device="cuda")
    static_in.copy_(data)
    graph.replay()
    with torch.no_grad():
        errors.append(float((static_out - model(data)).abs().max()))
compiled = torch.compile(model, mode="reduce-overhead")
compile_errors = []
with torch.no_grad():
    for _ in range(4):
        data = torch.randn(64, 1024, device="cuda")
        compile_errors.append(float((compiled(data) - model(data)).abs().max()))
print(json.dumps({"params_in_pool": params_in_pool, "graph_errors": errors,
                  "compile_errors": compile_errors}))
""")
        self.assertTrue(r["params_in_pool"], r)
        self.assertTrue(all(e == 0.0 for e in r["graph_errors"]), r)
        self.assertTrue(all(e < 1e-2 for e in r["compile_errors"]), r)

    def test_capture_under_install_names_the_pool(self):
        r = self.run_case("graphs_install", """
import uma_torch
uma_torch.install(@LIBRARY@, quota_bytes=8 << 30)
model = torch.nn.Linear(256, 256).cuda()
x = torch.randn(8, 256, device="cuda")
graph = torch.cuda.CUDAGraph()
try:
    with torch.no_grad(), torch.cuda.graph(graph):
        y = model(x)
    out = {"captured": True}
except Exception as error:
    out = {"captured": False, "error": str(error)[:600], "type": type(error).__name__}
print(json.dumps(out))
""")
        if r["captured"]:
            self.fail(f"capture under the global install succeeded silently: {r}")
        self.assertIn("uma_torch.pool()", r["error"], r)

    def test_reduce_overhead_under_install_works_or_names_the_pool(self):
        r = self.run_case("compile_install", """
import uma_torch
uma_torch.install(@LIBRARY@, quota_bytes=8 << 30)
model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(),
                            torch.nn.Linear(2048, 512)).cuda()
compiled = torch.compile(model, mode="reduce-overhead")
errors = []
try:
    with torch.no_grad():
        for _ in range(4):
            data = torch.randn(32, 512, device="cuda")
            errors.append(float((compiled(data) - model(data)).abs().max()))
    out = {"ran": True, "errors": errors}
except Exception as error:
    out = {"ran": False, "error": str(error)[-800:], "type": type(error).__name__}
print(json.dumps(out))
""")
        if r["ran"]:
            self.assertTrue(all(e < 1e-2 for e in r["errors"]), r)
        else:
            self.assertIn("uma_torch.pool()", r["error"], r)

    def _spill_run(self, install, fraction):
        setup = ("import uma_torch\numa_torch.install(@LIBRARY@, quota_bytes=12 << 30)\n"
                 if install else "")
        return self.run_case("spill_" + ("uma" if install else "native"), setup + f"""
import time
torch.cuda.set_per_process_memory_fraction({fraction})
torch.manual_seed(0)
width, layers = 4096, 24     # 403 M parameters: 1.6 GB, 6.4 GB with AdamW's state and grads
out = {{}}
try:
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    times = []
    for step in range(4):
        torch.cuda.synchronize(); start = time.perf_counter()
        loss = model(torch.randn(512, width, device="cuda")).square().mean()
        loss.backward(); optimizer.step(); optimizer.zero_grad()
        torch.cuda.synchronize(); times.append((time.perf_counter() - start) * 1e3)
    out.update(completed=True, step_ms=times, loss=float(loss))
except torch.OutOfMemoryError as error:
    out.update(completed=False, error=str(error)[:300])
if {install!r}:
    res = uma_torch.residency()
    out["budget"] = res["devices"][0]["budget_bytes"]
    out["memory"] = res["devices"][0]["memory_bytes"]
    out["spilled"] = uma_torch.spilled_bytes()
    out["allocated_peak"] = uma_torch.max_memory_allocated()
print(json.dumps(out))
""")

    def test_spill_instead_of_oom(self):
        fraction = 0.05  # ~4 GB of an 80 GB card: the 6.4 GB of state cannot fit
        native = self._spill_run(False, fraction)
        uma = self._spill_run(True, fraction)
        whole = self._spill_run(False, 1.0)  # the same steps in device memory: the baseline
        record("spill_ratio", {"uma_ms": uma.get("step_ms"), "native_whole_ms":
                               whole.get("step_ms")})
        self.assertTrue(whole["completed"], whole)
        self.assertFalse(native["completed"], native)
        self.assertTrue(uma["completed"], uma)
        self.assertAlmostEqual(uma["budget"] / uma["memory"], fraction, places=3)
        self.assertGreater(uma["spilled"], 0, uma)
        self.assertGreater(uma["allocated_peak"], uma["budget"], uma)

    def test_offload_of_a_model_in_a_pool(self):
        r = self.run_case("offload_pool", """
import uma_torch
def train(offload_it):
    torch.manual_seed(0)
    pool = uma_torch.pool(label="offload", library=@LIBRARY@, quota_bytes=8 << 30)
    with pool:
        model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)]).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    handle = uma_torch.offload(model, optimizer, budget_bytes=24 << 20) if offload_it else None
    losses = []
    g = torch.Generator(device="cuda").manual_seed(1)
    for _ in range(4):
        x = torch.randn(256, 1024, device="cuda", generator=g)
        loss = model(x).square().mean(); loss.backward(); optimizer.step()
        optimizer.zero_grad(); losses.append(float(loss))
    state_in_pool = all(pool.owns(v) for s in optimizer.state.values() for v in s.values()
                        if torch.is_tensor(v) and v.is_cuda)
    grads_in_pool = all(p.grad is None or pool.owns(p.grad) for p in model.parameters())
    if handle is not None:
        stats = dict(handle.stats); handle.undo()
    else:
        stats = {}
    return losses, state_in_pool, grads_in_pool, stats, [p.detach().cpu() for p in model.parameters()]
plain = train(False)
offloaded = train(True)
same = all(torch.equal(a, b) for a, b in zip(plain[4], offloaded[4]))
print(json.dumps({"plain": plain[0], "offloaded": offloaded[0], "state_in_pool": offloaded[1],
                  "grads_in_pool": offloaded[2], "plans": offloaded[3].get("plans"),
                  "params_equal": same}))
""")
        self.assertTrue(r["state_in_pool"], r)
        self.assertTrue(r["grads_in_pool"], r)
        self.assertGreater(r["plans"], 0, r)
        self.assertEqual(r["plain"], r["offloaded"], r)
        self.assertTrue(r["params_equal"], r)


if __name__ == "__main__":
    unittest.main()
